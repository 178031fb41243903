package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/internal/atomicfile"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/lease/etcdstore"
)

// openStore opens the configured lease store and registers its Close.
func (c *Controller) openStore() error {
	if c.cfg.Store == StoreEtcd {
		return c.openEtcd()
	}
	if err := atomicfile.MkdirAll(c.cfg.DataDir, 0o700); err != nil { // durable, like the store file in it
		return fmt.Errorf("data dir: %w", err)
	}
	s, err := boltstore.Open(StorePath(c.cfg.DataDir), boltstore.Options{OnCommit: c.metrics.ObserveCommit, Epoch: c.cfg.Epoch})
	if err != nil {
		return err
	}
	c.setStore(s, s.Err)
	return nil
}

// openEtcd opens the etcd store; its Err reports an epoch bump, which ends
// Run so that the process restarts on the new epoch.
//
// The etcd store takes a new prefix's epoch from the clock and cannot be
// given one, so with etcd the controller refuses to start at all while the
// clock reads before the build date, and refuses an epoch setting. Opening
// is bounded by the etcd dial and request timeouts.
func (c *Controller) openEtcd() error {
	if c.cfg.Epoch != 0 {
		return errors.New("epoch (--epoch): not supported with the etcd store (it takes a new prefix's epoch from the clock)")
	}
	if err := lease.CheckCreationClock(time.Now()); err != nil {
		return err
	}
	s, err := etcdstore.Open(context.Background(), c.cfg.Etcd)
	if err != nil {
		return err
	}
	c.setStore(s, s.Err)
	return nil
}

// setStore makes s the controller's store, closed last by closeAll.
func (c *Controller) setStore(s lease.Store, failed func() error) {
	c.store, c.storeErr = s, failed
	c.onClose(func() {
		if err := s.Close(); err != nil {
			c.log.Error("close store", "err", err)
		}
	})
}
