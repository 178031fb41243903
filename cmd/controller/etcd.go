package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/etcdstore"
)

// etcdFlags registers the etcd store's flags into cfg.Etcd.
func etcdFlags(fs *flag.FlagSet, cfg *Config) {
	e := &cfg.Etcd
	fs.Func("etcd-endpoints", "comma-separated etcd client URLs (with --store etcd)", func(v string) error {
		e.Endpoints = strings.Split(v, ",")
		return nil
	})
	fs.StringVar(&e.Prefix, "etcd-prefix", "", "etcd key prefix (default fencegate/)")
	fs.StringVar(&e.Username, "etcd-username", "", "etcd auth user")
	fs.StringVar(&e.PasswordFile, "etcd-password-file", "", "file holding the etcd auth password")
	fs.StringVar(&e.TLS.CA, "etcd-ca", "", "PEM CA bundle to verify the etcd servers")
	fs.StringVar(&e.TLS.Cert, "etcd-cert", "", "PEM client certificate for etcd")
	fs.StringVar(&e.TLS.Key, "etcd-key", "", "PEM client certificate key for etcd")
}

// overlayEtcd copies the etcd field of flag name from flags into cfg.
func overlayEtcd(cfg *etcdstore.Config, flags etcdstore.Config, name string) {
	set := map[string]func(){
		"etcd-endpoints": func() { cfg.Endpoints = flags.Endpoints }, "etcd-prefix": func() { cfg.Prefix = flags.Prefix },
		"etcd-username":      func() { cfg.Username = flags.Username },
		"etcd-password-file": func() { cfg.PasswordFile, cfg.Password = flags.PasswordFile, "" },
		"etcd-ca":            func() { cfg.TLS.CA = flags.TLS.CA },
		"etcd-cert":          func() { cfg.TLS.Cert = flags.TLS.Cert },
		"etcd-key":           func() { cfg.TLS.Key = flags.TLS.Key },
	}
	if f, ok := set[name]; ok {
		f()
	}
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

// openEtcd opens the etcd store; its Err reports an epoch bump, which ends
// serve so that the process restarts on the new epoch.
//
// The etcd store takes a new prefix's epoch from the clock and cannot be
// given one, so with etcd the controller refuses to start at all while the
// clock reads before the build date, and refuses --epoch.
func (c *components) openEtcd(ctx context.Context, cfg Config) error {
	if cfg.Epoch != 0 {
		return errors.New("epoch (--epoch): not supported with the etcd store (it takes a new prefix's epoch from the clock)")
	}
	if err := lease.CheckCreationClock(time.Now()); err != nil {
		return err
	}
	s, err := etcdstore.Open(ctx, cfg.Etcd)
	if err != nil {
		return err
	}
	c.store, c.storeErr = s, s.Err
	c.onClose(func() {
		if err := s.Close(); err != nil {
			c.log.Error("close store", "err", err)
		}
	})
	return nil
}
