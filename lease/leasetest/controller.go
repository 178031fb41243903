package leasetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/protocol"
)

// MustController returns a controller on a fresh bbolt store in t.TempDir,
// closed in t.Cleanup, and a key ring trusting its key. cfg's Store and
// Signer are filled in; clock may be nil (real clock).
func MustController(t testing.TB, cfg lease.Config) (*lease.Controller, *boltstore.Store, *fence.KeyRing) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "leases.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	c, keys := MustControllerOn(t, cfg, st)
	return c, st, keys
}

// MustSigner returns a signer with a fresh key and a key ring trusting it.
func MustSigner(t testing.TB) (*fence.Signer, *fence.KeyRing) {
	t.Helper()
	priv, err := fence.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := fence.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := fence.NewKeyRing(0, signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	return signer, keys
}

// MustControllerOn returns a controller on st (which the caller closes)
// with a fresh key, and a key ring trusting it. cfg.Signer, if set, is
// kept (several replicas share one key).
func MustControllerOn(t testing.TB, cfg lease.Config, st lease.Store) (*lease.Controller, *fence.KeyRing) {
	t.Helper()
	if cfg.Signer == nil {
		cfg.Signer, _ = MustSigner(t)
	}
	keys, err := fence.NewKeyRing(0, cfg.Signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = st
	c, err := lease.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, keys
}

// Direct is a Client calling the controller in-process.
type Direct struct{ C *lease.Controller }

// Do calls C.Do.
func (d Direct) Do(_ testing.TB, op protocol.LeaseOp, domain string, req protocol.Request) protocol.Response {
	return d.C.Do(context.Background(), op, domain, req)
}
