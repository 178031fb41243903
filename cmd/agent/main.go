// Command agent is fencegate's edge agent: it owns the gateway's device
// controllers and applies a command only after a durable fencing-token
// comparison. See docs/agent.md.
//
//	agent --config agent.yaml [--log-format text|json] [--log-level info]
//	agent backup --config agent.yaml --out FILE [--force]
//	agent --version
//
// SIGHUP re-reads the config file and applies its trust.keys at once
// (key rotation, docs/operations.md); other changes need a restart.
//
// Under systemd (Type=notify, deploy/systemd/) it reports READY=1 once its
// store, listeners, broker connection and drivers are open.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/fencegate/fencegate/agent"
	"github.com/fencegate/fencegate/internal/buildinfo"
	"github.com/fencegate/fencegate/internal/sdnotify"
	"github.com/fencegate/fencegate/transport/mqtt"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "backup" { // backup.go
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := runBackup(ctx, os.Args[2:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	configPath := flag.String("config", "", "agent configuration file (YAML); required")
	logFormat := flag.String("log-format", "text", "log format: text or json")
	logLevel := flag.String("log-level", "info", "log level: debug, info, warn or error")
	version := buildinfo.Flag(flag.CommandLine)
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), "usage: agent --config FILE [flags]\n       agent --version\n\nflags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *version {
		buildinfo.Fprint(os.Stdout, "agent")
		return
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "agent: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *configPath, *logFormat, *logLevel); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, configPath, logFormat, logLevel string) error {
	log, err := newLogger(logFormat, logLevel)
	if err != nil {
		return err
	}
	if configPath == "" {
		return errors.New("--config is required")
	}
	cfg, err := agent.LoadConfig(configPath)
	if err != nil {
		return err
	}
	a, err := agent.New(cfg, log)
	if err != nil {
		return err
	}
	log.Info("agent started", "id", cfg.Agent.ID, "broker", mqtt.Redact(a.BrokerURL()), "http", a.HTTPAddr(), "devices", len(cfg.Devices),
		"version", buildinfo.Read().Version)
	if _, err := sdnotify.Notify(sdnotify.Ready); err != nil {
		log.Warn("systemd notification", "err", err)
	}
	rctx, stopReload := context.WithCancel(ctx)
	var reloads sync.WaitGroup
	reloads.Go(func() { reloadOnHangup(rctx, a, configPath, cfg, log) })
	defer reloads.Wait()
	defer stopReload()
	return a.Run(ctx)
}

func newLogger(format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text or json", format)
}
