// Command controller is fencegate's lease controller: it grants signed,
// monotonic fencing tokens over MQTT and HTTP (docs/controller.md). The
// controller itself is package lease/server; this command parses flags.
//
//	controller --data-dir DIR --key FILE [--mqtt URL | --embedded-broker ADDR] [--http ADDR]
//	controller keygen [--dir DIR] [--force]
//	controller epoch-bump --data-dir DIR [--epoch N]
//	controller backup (--config FILE | --http ADDR) --out FILE [--token-file F] [--force]
//	controller --store etcd --etcd-endpoints URL,... --key FILE [...]
//	controller epoch-bump --store etcd --etcd-endpoints URL,...
//	controller --version
//
// Under systemd (Type=notify, deploy/systemd/) it reports READY=1 once its
// store, key and listeners are open.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/internal/buildinfo"
	"github.com/fencegate/fencegate/internal/sdnotify"
	"github.com/fencegate/fencegate/lease/server"
)

func main() {
	cmd, err := parseArgs(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, cmd, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
}

// command is a parsed command line.
type command struct {
	name   string        // "serve", "keygen", "epoch-bump", "backup" or "version"
	cfg    server.Config // serve
	dir    string        // keygen: output directory; epoch-bump: data dir
	over   bool          // keygen: overwrite
	backup backupCmd     // backup (backup.go)
}

// run executes cmd until it is done or ctx is cancelled; cancellation is a
// clean exit (nil).
func run(ctx context.Context, cmd command, stderr io.Writer) error {
	switch cmd.name {
	case "version":
		buildinfo.Fprint(os.Stdout, "controller")
		return nil
	case "keygen":
		return keygen(cmd.dir, cmd.over, stderr)
	case "epoch-bump":
		at := bumpTime(time.Now(), cmd.cfg.Epoch)
		if cmd.cfg.Store == server.StoreEtcd {
			return epochBumpEtcd(ctx, cmd.cfg.Etcd, at, stderr)
		}
		return epochBump(cmd.dir, at, stderr)
	case "backup":
		return runBackup(ctx, cmd.backup, stderr)
	}
	return serve(ctx, cmd.cfg, stderr)
}

// serve runs the controller until ctx is cancelled (a clean exit) or the
// store fails, logging to stderr at the configured level.
func serve(ctx context.Context, cfg server.Config, stderr io.Writer) error {
	level, _ := cfg.Level() // validated
	c, err := server.New(cfg, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	if err != nil {
		return err
	}
	if _, err := sdnotify.Notify(sdnotify.Ready); err != nil {
		fmt.Fprintln(stderr, "controller: systemd notification:", err)
	}
	return c.Run(ctx)
}

// parseArgs parses the subcommand and its flags.
func parseArgs(args []string, stderr io.Writer) (command, error) {
	if len(args) > 0 {
		switch args[0] {
		case "keygen":
			return parseKeygen(args[1:], stderr)
		case "epoch-bump":
			return parseEpochBump(args[1:], stderr)
		case "backup":
			return parseBackup(args[1:], stderr)
		case "serve":
			args = args[1:]
		}
	}
	return parseServe(args, stderr)
}

// parseServe reads --config first, then lets every flag given override it:
// a first pass checks every flag and finds --config, a second applies the
// flags onto the file's values.
func parseServe(args []string, stderr io.Writer) (command, error) {
	var scratch server.Config
	var configFile string
	first := serveFlags(&scratch, &configFile, stderr)
	if err := parseAll(first, args); err != nil {
		return command{}, err
	}
	if first.Lookup("version").Value.String() == "true" {
		return command{name: "version"}, nil
	}
	cfg := server.Config{}
	if configFile != "" {
		var err error
		if cfg, err = server.LoadConfig(configFile); err != nil {
			return command{}, err
		}
	}
	fs := serveFlags(&cfg, &configFile, io.Discard)
	if err := parseAll(fs, args); err != nil {
		return command{}, err
	}
	fs.Visit(func(f *flag.Flag) { clearOverridden(&cfg, f.Name) })
	cfg = cfg.WithStoreDefaults()
	return command{name: "serve", cfg: cfg}, cfg.Validate()
}

func parseAll(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}
