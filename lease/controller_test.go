package lease_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestScenariosDirect(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		clock := leasetest.NewClock()
		c, _, keys := leasetest.MustController(t, lease.Config{Clock: clock})
		return leasetest.Env{Client: leasetest.Direct{C: c}, Clock: clock, Keys: keys}
	})
}

// TestRestartHonoursStoredLease: a lease found in the store after a restart
// runs for its full TTL from the restart, and seq continues after release.
func TestRestartHonoursStoredLease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	priv, _ := fence.GenerateKey()
	signer, _ := fence.NewSigner(priv)
	keys, _ := fence.NewKeyRing(0, signer.Public())
	open := func(clock lease.Clock) (*lease.Controller, *boltstore.Store) {
		st, err := boltstore.Open(path, boltstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := lease.New(context.Background(), lease.Config{Store: st, Signer: signer, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return c, st
	}
	clock := leasetest.NewClock()
	c, st := open(clock)
	env := leasetest.Env{Client: leasetest.Direct{C: c}, Clock: clock, Keys: keys}
	a := leasetest.Verified(t, env, leasetest.Acquire(t, env.Client, "d", "alice", 10*time.Second))
	b := leasetest.Verified(t, env, leasetest.Acquire(t, env.Client, "e", "alice", 10*time.Second))
	leasetest.Want(t, c.Do(context.Background(), protocol.OpRelease, "e", protocol.Request{Token: b.Raw}), protocol.CodeReleased)
	clock.Advance(9 * time.Second)
	st.Close()

	clock2 := leasetest.NewClock()
	clock2.Advance(time.Hour) // the new process's clock has nothing to do with the old one
	c, st = open(clock2)
	defer st.Close()
	env.Client, env.Clock = leasetest.Direct{C: c}, clock2
	clock2.Advance(9 * time.Second)
	leasetest.Want(t, leasetest.Acquire(t, env.Client, "d", "bob", time.Second), protocol.CodeHeld)
	r := c.Do(context.Background(), protocol.OpRenew, "d", protocol.Request{Token: a.Raw})
	if r.Code != protocol.CodeRenewed || r.Token != a.Raw {
		t.Fatalf("renew after restart: %+v", r)
	}
	b2 := leasetest.Verified(t, env, leasetest.Acquire(t, env.Client, "e", "bob", time.Second))
	leasetest.Newer(t, b, b2)
	if b2.Seq != b.Seq+1 {
		t.Fatalf("seq after release and restart: %d, want %d", b2.Seq, b.Seq+1)
	}
}

// TestEpochBump: after a bump every new token is newer than every old one,
// even if the restored store's seq is behind.
func TestEpochBump(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "leases.db")
	priv, _ := fence.GenerateKey()
	signer, _ := fence.NewSigner(priv)
	st, err := boltstore.Open(path, boltstore.Options{Epoch: 5000})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	old, bumped, err := boltstore.BumpEpoch(path, time.UnixMilli(1000), time.Second)
	if err != nil || old != 5000 || bumped != 5001 {
		t.Fatalf("bump with a clock behind: %d → %d, %v; want 5000 → 5001", old, bumped, err)
	}
	if _, _, err := boltstore.BumpEpoch(filepath.Join(dir, "missing.db"), time.Now(), time.Second); err == nil {
		t.Fatal("bump of a missing file succeeded")
	}
	st, err = boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := boltstore.BumpEpoch(path, time.Now(), 50*time.Millisecond); err == nil {
		t.Fatal("bump of an open store succeeded")
	}
	c, err := lease.New(context.Background(), lease.Config{Store: st, Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	if c.Epoch() != 5001 {
		t.Fatalf("epoch %d, want 5001", c.Epoch())
	}
}

// TestConcurrentClients: many clients on a few domains; at every moment at
// most one live lease per domain, and per domain the tokens handed out are
// distinct and verify.
func TestConcurrentClients(t *testing.T) {
	c, _, keys := leasetest.MustController(t, lease.Config{})
	var mu sync.Mutex
	seen := map[string]map[uint64]string{}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			domain := []string{"a", "b", "c", "d"}[i%4]
			holder := []string{"h1", "h2", "h3"}[i%3]
			for range 40 {
				r := c.Do(context.Background(), protocol.OpAcquire, domain, protocol.Request{RequestID: leasetest.ID(), Holder: holder, TTLms: 100, WaitMs: 50})
				if r.Code != protocol.CodeGranted {
					continue
				}
				tok, err := keys.Verify(r.Token)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[domain] == nil {
					seen[domain] = map[uint64]string{}
				}
				if prev, dup := seen[domain][tok.Seq]; dup && prev != r.Token {
					t.Errorf("two tokens at %s seq %d", domain, tok.Seq)
				}
				seen[domain][tok.Seq] = r.Token
				mu.Unlock()
				c.Do(context.Background(), protocol.OpRelease, domain, protocol.Request{Token: r.Token})
			}
		}()
	}
	wg.Wait()
	for d, m := range seen {
		if len(m) == 0 {
			t.Errorf("domain %s: no grants", d)
		}
	}
}
