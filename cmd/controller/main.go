// Command controller is fencegate's lease controller: it grants signed,
// monotonic fencing tokens over MQTT and HTTP (docs/controller.md).
//
//	controller --data-dir DIR --key FILE [--mqtt URL | --embedded-broker ADDR] [--http ADDR]
//	controller keygen [--dir DIR] [--force]
//	controller epoch-bump --data-dir DIR [--epoch N]
//	controller --store etcd --etcd-endpoints URL,... --key FILE [...]
//	controller epoch-bump --store etcd --etcd-endpoints URL,...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
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
	name string // "serve", "keygen" or "epoch-bump"
	cfg  Config // serve
	dir  string // keygen: output directory; epoch-bump: data dir
	over bool   // keygen: overwrite
}

// run executes cmd until it is done or ctx is cancelled; cancellation is a
// clean exit (nil).
func run(ctx context.Context, cmd command, stderr io.Writer) error {
	switch cmd.name {
	case "keygen":
		return keygen(cmd.dir, cmd.over, stderr)
	case "epoch-bump":
		at := bumpTime(time.Now(), cmd.cfg.Epoch)
		if cmd.cfg.Store == storeEtcd {
			return epochBumpEtcd(ctx, cmd.cfg.Etcd, at, stderr)
		}
		return epochBump(cmd.dir, at, stderr)
	}
	return serve(ctx, cmd.cfg, stderr)
}

// bumpTime is the time an epoch bump takes as "now": the clock, or the
// instant of atLeast (Unix ms) if that is later. A bump sets the epoch to
// max(now in Unix ms, old + 1).
func bumpTime(now time.Time, atLeast uint64) time.Time {
	if atLeast > uint64(max(now.UnixMilli(), 0)) && atLeast <= math.MaxInt64 {
		return time.UnixMilli(int64(atLeast))
	}
	return now
}

// parseArgs parses the subcommand and its flags.
func parseArgs(args []string, stderr io.Writer) (command, error) {
	if len(args) > 0 {
		switch args[0] {
		case "keygen":
			return parseKeygen(args[1:], stderr)
		case "epoch-bump":
			return parseEpochBump(args[1:], stderr)
		case "serve":
			args = args[1:]
		}
	}
	return parseServe(args, stderr)
}

func parseKeygen(args []string, stderr io.Writer) (command, error) {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cmd := command{name: "keygen"}
	fs.StringVar(&cmd.dir, "dir", ".", "directory to write controller.key (0600) and controller.pub into")
	fs.BoolVar(&cmd.over, "force", false, "overwrite an existing controller.key")
	return cmd, parseAll(fs, args)
}

func parseEpochBump(args []string, stderr io.Writer) (command, error) {
	fs := flag.NewFlagSet("epoch-bump", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cmd := command{name: "epoch-bump"}
	fs.StringVar(&cmd.dir, "data-dir", "", "the stopped controller's data directory (required with bbolt)")
	fs.Uint64Var(&cmd.cfg.Epoch, "epoch", 0, "raise the epoch to at least this (e.g. one above an epoch seen on the broker)")
	fs.StringVar(&cmd.cfg.Store, "store", storeBolt, "lease store: bbolt or etcd")
	etcdFlags(fs, &cmd.cfg)
	if err := parseAll(fs, args); err != nil {
		return cmd, err
	}
	switch {
	case cmd.cfg.Store == storeEtcd:
		return cmd, cmd.cfg.Etcd.Validate("epoch-bump: etcd")
	case cmd.cfg.Store != storeBolt:
		return cmd, fmt.Errorf("epoch-bump: --store %q is not bbolt or etcd", cmd.cfg.Store)
	case cmd.dir == "":
		return cmd, errors.New("epoch-bump: --data-dir is required")
	}
	return cmd, nil
}

// parseServe reads --config first, then lets every flag given override it.
func parseServe(args []string, stderr io.Writer) (command, error) {
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var flags Config
	configFile := fs.String("config", "", "YAML config file (optional; flags override it)")
	fs.StringVar(&flags.Store, "store", "", "lease store: bbolt (default) or etcd")
	fs.StringVar(&flags.DataDir, "data-dir", "", "directory of the bbolt lease store (required with bbolt)")
	etcdFlags(fs, &flags)
	fs.StringVar(&flags.MQTTShareGroup, "mqtt-share-group", "", "MQTT shared-subscription group of the replicas (default with etcd: fencegate-controllers)")
	fs.StringVar(&flags.Key, "key", "", "Ed25519 private key, PKCS#8 PEM (required)")
	fs.BoolVar(&flags.GenerateKey, "generate-key", false, "create --key (and its .pub) if it does not exist")
	fs.StringVar(&flags.HTTP, "http", "", "HTTP listen address, e.g. 127.0.0.1:8480")
	fs.StringVar(&flags.EmbeddedBroker, "embedded-broker", "", "start an in-process MQTT broker on this address")
	fs.StringVar(&flags.MQTT.Broker, "mqtt", "", "MQTT broker URL, e.g. tcp://127.0.0.1:1883")
	fs.StringVar(&flags.MQTT.ClientID, "mqtt-client-id", "", "MQTT client id (default fencegate-controller)")
	fs.StringVar(&flags.MQTT.Username, "mqtt-username", "", "MQTT username")
	fs.StringVar(&flags.MQTT.Password, "mqtt-password", "", "MQTT password")
	fs.StringVar(&flags.MQTT.TLS.CA, "mqtt-ca", "", "PEM CA bundle to verify the broker")
	fs.StringVar(&flags.MQTT.TLS.Cert, "mqtt-cert", "", "PEM client certificate")
	fs.StringVar(&flags.MQTT.TLS.Key, "mqtt-key", "", "PEM client certificate key")
	guardFlags(fs, &flags)
	fs.StringVar(&flags.TopicPrefix, "topic-prefix", "", "MQTT topic prefix (default fencegate/v1)")
	fs.StringVar(&flags.LogLevel, "log-level", "", "debug, info, warn or error (default info)")
	if err := parseAll(fs, args); err != nil {
		return command{}, err
	}
	cfg := Config{}
	if *configFile != "" {
		var err error
		if cfg, err = loadConfigFile(*configFile); err != nil {
			return command{}, err
		}
	}
	fs.Visit(func(f *flag.Flag) { overlay(&cfg, flags, f.Name) })
	cfg = cfg.withStoreDefaults()
	return command{name: "serve", cfg: cfg}, cfg.Validate()
}

// guardFlags registers the flags that bound what the controller serves:
// reply prefixes, domains, the domain cap and a new store's epoch.
func guardFlags(fs *flag.FlagSet, flags *Config) {
	fs.Func("mqtt-reply-prefix", "a further topic prefix lease responses may go to (repeatable; fencegate/v1/replies/ always)", func(v string) error {
		flags.MQTT.ReplyPrefixes = append(flags.MQTT.ReplyPrefixes, v)
		return nil
	})
	fs.Func("domains", "comma-separated glob patterns of the domains served (default: all)", func(v string) error {
		flags.Domains = strings.Split(v, ",")
		return nil
	})
	fs.IntVar(&flags.MaxDomains, "max-domains", 0, "domains held in memory at most; beyond it acquires are busy (default 10000)")
	fs.Uint64Var(&flags.Epoch, "epoch", 0, "epoch of a new store instead of the clock's (required while the clock is before the build date)")
}

// overlay copies the field of flag name from flags into cfg.
func overlay(cfg *Config, flags Config, name string) {
	set := map[string]func(){
		"data-dir": func() { cfg.DataDir = flags.DataDir }, "key": func() { cfg.Key = flags.Key },
		"generate-key": func() { cfg.GenerateKey = flags.GenerateKey }, "http": func() { cfg.HTTP = flags.HTTP },
		"embedded-broker":   func() { cfg.EmbeddedBroker = flags.EmbeddedBroker },
		"mqtt":              func() { cfg.MQTT.Broker = flags.MQTT.Broker },
		"mqtt-client-id":    func() { cfg.MQTT.ClientID = flags.MQTT.ClientID },
		"mqtt-username":     func() { cfg.MQTT.Username = flags.MQTT.Username },
		"mqtt-password":     func() { cfg.MQTT.Password = flags.MQTT.Password },
		"mqtt-ca":           func() { cfg.MQTT.TLS.CA = flags.MQTT.TLS.CA },
		"mqtt-cert":         func() { cfg.MQTT.TLS.Cert = flags.MQTT.TLS.Cert },
		"mqtt-key":          func() { cfg.MQTT.TLS.Key = flags.MQTT.TLS.Key },
		"mqtt-reply-prefix": func() { cfg.MQTT.ReplyPrefixes = flags.MQTT.ReplyPrefixes },
		"topic-prefix":      func() { cfg.TopicPrefix = flags.TopicPrefix },
		"log-level":         func() { cfg.LogLevel = flags.LogLevel },
		"store":             func() { cfg.Store = flags.Store },
		"mqtt-share-group":  func() { cfg.MQTTShareGroup = flags.MQTTShareGroup },
		"domains":           func() { cfg.Domains = flags.Domains },
		"max-domains":       func() { cfg.MaxDomains = flags.MaxDomains },
		"epoch":             func() { cfg.Epoch = flags.Epoch },
	}
	if f, ok := set[name]; ok {
		f()
	}
	overlayEtcd(&cfg.Etcd, flags.Etcd, name)
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
