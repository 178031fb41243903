package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/fencegate/fencegate/internal/backupfile"
	"github.com/fencegate/fencegate/internal/httpauth"
	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/lease/server"
)

// backupCmd is "controller backup": where the running controller's HTTP
// API is and where the copy goes.
type backupCmd struct {
	http, tokenFile, out string
	force                bool
}

func parseBackup(args []string, stderr io.Writer) (command, error) {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var b backupCmd
	var configFile string
	fs.StringVar(&configFile, "config", "", "the running controller's config file (its http address)")
	fs.StringVar(&b.http, "http", "", "the running controller's HTTP address, e.g. 127.0.0.1:8480 (instead of --config)")
	fs.StringVar(&b.tokenFile, "token-file", "", "bearer token file, if the controller's HTTP API requires one")
	fs.StringVar(&b.out, "out", "", "file to write the copy of the lease store to (required)")
	fs.BoolVar(&b.force, "force", false, "replace --out if it exists")
	if err := parseAll(fs, args); err != nil {
		return command{}, err
	}
	if configFile != "" && b.http == "" {
		cfg, err := server.LoadConfig(configFile)
		if err != nil {
			return command{}, err
		}
		b.http = cfg.HTTP
	}
	switch {
	case b.http == "":
		return command{}, errors.New("backup: --http or a --config with http is required (the online backup goes through the running controller's HTTP API)")
	case b.out == "":
		return command{}, errors.New("backup: --out is required")
	}
	return command{name: "backup", backup: b}, nil
}

// runBackup fetches a consistent copy of the running controller's bbolt
// store (GET /v1/backup), checks it and marks it as a backup copy: the
// controller refuses to serve the copy until 'controller epoch-bump' has
// raised its epoch, so a restore can never mint a token at or below one
// minted after the backup (I1).
func runBackup(ctx context.Context, b backupCmd, stderr io.Writer) error {
	url, err := backupfile.LoopbackURL(b.http, "/v1/backup")
	if err != nil {
		return fmt.Errorf("backup: http %q: %w", b.http, err)
	}
	tok, err := httpauth.ClientToken(b.tokenFile)
	if err != nil {
		return fmt.Errorf("backup: --token-file: %w", err)
	}
	var sum boltstore.Summary
	check := func(path string) (err error) {
		sum, err = boltstore.MarkRestorePending(path)
		return err
	}
	n, err := backupfile.Fetch(ctx, backupfile.Request{URL: url, Token: tok, Out: b.out, Overwrite: b.force, Check: check})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s (%d bytes): epoch %d, %d domains; to restore: stop the controller, put it in place of %s, run 'controller epoch-bump --data-dir DIR', start\n",
		b.out, n, sum.Epoch, sum.Domains, server.StorePath("DIR"))
	return nil
}
