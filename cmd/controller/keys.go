package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/lease/etcdstore"
	"github.com/fencegate/fencegate/lease/server"
)

// The sub-commands keygen and epoch-bump: their flags and what they do.

func parseKeygen(args []string, stderr io.Writer) (command, error) {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usageOf(fs, "controller keygen [--dir DIR] [--force]")
	cmd := command{name: "keygen"}
	fs.StringVar(&cmd.dir, "dir", ".", "directory to write controller.key (0600) and controller.pub into")
	fs.BoolVar(&cmd.over, "force", false, "overwrite an existing controller.key")
	return cmd, parseAll(fs, args)
}

func parseEpochBump(args []string, stderr io.Writer) (command, error) {
	fs := flag.NewFlagSet("epoch-bump", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usageOf(fs, "controller epoch-bump --data-dir DIR [--epoch N]\n       controller epoch-bump --store etcd --etcd-endpoints URL,... [--epoch N]")
	cmd := command{name: "epoch-bump"}
	fs.StringVar(&cmd.dir, "data-dir", "", "the stopped controller's data directory (required with bbolt)")
	fs.Uint64Var(&cmd.cfg.Epoch, "epoch", 0, "raise the epoch to at least this (e.g. one above an epoch seen on the broker)")
	fs.StringVar(&cmd.cfg.Store, "store", server.StoreBolt, "lease store: bbolt or etcd")
	etcdFlags(fs, &cmd.cfg)
	if err := parseAll(fs, args); err != nil {
		return cmd, err
	}
	switch {
	case cmd.cfg.Store == server.StoreEtcd:
		return cmd, cmd.cfg.Etcd.Validate("epoch-bump: etcd")
	case cmd.cfg.Store != server.StoreBolt:
		return cmd, fmt.Errorf("epoch-bump: --store %q is not bbolt or etcd", cmd.cfg.Store)
	case cmd.dir == "":
		return cmd, errors.New("epoch-bump: --data-dir is required")
	}
	return cmd, nil
}

// usageOf is a sub-command's usage: its synopsis, then its flags.
func usageOf(fs *flag.FlagSet, synopsis string) func() {
	return func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
}

// keygen writes a new controller.key (0600) and controller.pub into dir.
func keygen(dir string, overwrite bool, stderr io.Writer) error {
	id, err := fence.WriteKeyPair(dir, overwrite)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists (use --force to replace it)", filepath.Join(dir, fence.PrivateKeyFile))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s and %s (key id %s)\n", filepath.Join(dir, fence.PrivateKeyFile),
		filepath.Join(dir, fence.PublicKeyFile), id)
	return nil
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

// epochBump raises the epoch of the (stopped) controller's store to
// max(now in Unix ms, old + 1).
func epochBump(dataDir string, now time.Time, stderr io.Writer) error {
	path := server.StorePath(dataDir)
	old, bumped, err := boltstore.BumpEpoch(path, now, time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "epoch of %s raised from %d to %d\n", path, old, bumped)
	return nil
}

// epochBumpEtcd raises the epoch of the etcd store to max(now in Unix ms,
// old + 1) (after a restore, with every replica stopped).
func epochBumpEtcd(ctx context.Context, cfg etcdstore.Config, now time.Time, stderr io.Writer) error {
	old, bumped, err := etcdstore.BumpEpochAt(ctx, cfg, now)
	if err != nil {
		return err
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = etcdstore.DefaultPrefix
	}
	fmt.Fprintf(stderr, "epoch under etcd prefix %q raised from %d to %d\n", prefix, old, bumped)
	return nil
}
