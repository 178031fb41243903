package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/fencegate/fencegate/agent"
	"github.com/fencegate/fencegate/internal/backupfile"
	"github.com/fencegate/fencegate/internal/httpauth"
	"github.com/fencegate/fencegate/persist"
)

// runBackup is "agent backup --config F --out FILE [--force]": it fetches a
// consistent copy of the running agent's fence store through its HTTP API
// (GET /v1/backup: bbolt's file lock keeps a second process out of the
// store), checks that the copy opens as a fence store and moves it into
// place. It returns the process exit code.
func runBackup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "the running agent's configuration file (its http.listen and http.token_file); required")
	out := fs.String("out", "", "file to write the copy of fence.db to; required")
	force := fs.Bool("force", false, "replace --out if it exists")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	sum, n, err := backup(ctx, *configPath, *out, *force)
	if err != nil {
		fmt.Fprintln(stderr, "agent backup:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s (%d bytes): schema %s, %d domain fences, %d devices, %d open in-doubt commands\n",
		*out, n, sum.Schema, len(sum.Domains), sum.Devices, sum.InDoubt)
	return 0
}

func backup(ctx context.Context, configPath, out string, force bool) (persist.Summary, int64, error) {
	switch {
	case configPath == "":
		return persist.Summary{}, 0, errors.New("--config is required")
	case out == "":
		return persist.Summary{}, 0, errors.New("--out is required")
	}
	cfg, err := agent.LoadConfig(configPath)
	if err != nil {
		return persist.Summary{}, 0, err
	}
	if cfg.HTTP.Listen == "off" {
		return persist.Summary{}, 0, errors.New(`http.listen: "off": the online backup goes through the running agent's HTTP API`)
	}
	url, err := backupfile.LoopbackURL(cfg.HTTP.Listen, "/v1/backup")
	if err != nil {
		return persist.Summary{}, 0, fmt.Errorf("http.listen: %q: %w", cfg.HTTP.Listen, err)
	}
	tok, err := httpauth.ClientToken(cfg.HTTP.TokenFile)
	if err != nil {
		return persist.Summary{}, 0, fmt.Errorf("http.token_file: %w", err)
	}
	var sum persist.Summary
	check := func(path string) (err error) {
		sum, err = persist.Inspect(path)
		return err
	}
	n, err := backupfile.Fetch(ctx, backupfile.Request{URL: url, Token: tok, Out: out, Overwrite: force, Check: check})
	return sum, n, err
}
