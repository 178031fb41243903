package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/etcdstore"
	"github.com/fencegate/fencegate/lease/leasetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdLeftovers...) }

// etcdLeftovers are goroutines a stopped embedded etcd member leaves
// behind: keep-alive HTTP connections between its peer transport
// (rafthttp's round trippers, never closed on Close) and the other
// members' peer servers (behind cmux). They block on sockets of the
// process's own loopback connections and hold no test state. The
// persistConn loops are net/http's, so an HTTP client of a test must close
// its idle connections itself (see replicas_test.go).
var etcdLeftovers = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/soheilhy/cmux.(*MuxConn).Read"),
	goleak.IgnoreAnyFunction("net/http.(*connReader).abortPendingRead"),
	goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
}

var prefixes atomic.Int64

// opener returns an Opener of stores under a fresh prefix of c.
func opener(c *Cluster) leasetest.Opener {
	prefix := fmt.Sprintf("t%d/", prefixes.Add(1))
	return func(t testing.TB) lease.Store {
		t.Helper()
		st, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: c.Endpoints(), Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
}

// TestStoreSuites runs the shared Store contract, the lease scenarios and
// the replica scenarios on a 3-member cluster.
func TestStoreSuites(t *testing.T) {
	c := StartCluster(t, 3)
	newBacking := func(testing.TB) leasetest.Opener { return opener(c) }
	t.Run("store", func(t *testing.T) { leasetest.RunStoreSuite(t, newBacking) })
	t.Run("replicas", func(t *testing.T) { leasetest.RunReplicas(t, newBacking) })
	t.Run("epoch", func(t *testing.T) { testEpoch(t, c) })
}

// testEpoch: replicas share the epoch; a bump raises it, stops a store
// opened before it from writing, and reaches stores opened after it.
func testEpoch(t *testing.T, c *Cluster) {
	ctx := context.Background()
	cli := c.Client(t)
	if _, _, err := etcdstore.BumpEpoch(ctx, cli, "nothing-here/", time.Now()); !errors.Is(err, etcdstore.ErrNoEpoch) {
		t.Fatalf("bump of an empty prefix: %v, want ErrNoEpoch", err)
	}
	open := opener(c)
	a, b := open(t).(*etcdstore.Store), open(t).(*etcdstore.Store)
	defer a.Close()
	defer b.Close()
	ea, _ := a.Epoch(ctx)
	if eb, _ := b.Epoch(ctx); ea != eb {
		t.Fatalf("replicas on one prefix have epochs %d and %d", ea, eb)
	}
	rec, err := a.Put(ctx, "d", lease.Record{Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	old, bumped, err := etcdstore.BumpEpoch(ctx, cli, a.Prefix(), time.UnixMilli(1)) // a clock far behind
	if err != nil || old != ea || bumped != ea+1 {
		t.Fatalf("bump: %d → %d, %v; want %d → %d", old, bumped, err, ea, ea+1)
	}
	if _, err := a.Put(ctx, "d", rec); !errors.Is(err, etcdstore.ErrEpochChanged) {
		t.Fatalf("put after a bump: %v, want ErrEpochChanged", err)
	}
	if !errors.Is(a.Err(), etcdstore.ErrEpochChanged) || b.Err() != nil {
		t.Fatalf("Err after a bump: %v and %v; want ErrEpochChanged and nil (b has not written)", a.Err(), b.Err())
	}
	if got, err := a.Load(ctx, "d"); err != nil || got.Version != rec.Version {
		t.Fatalf("load after a bump: %+v, %v; want the record unchanged", got, err)
	}
	c2 := open(t)
	defer c2.Close()
	if e, _ := c2.Epoch(ctx); e != bumped {
		t.Fatalf("epoch of a store opened after the bump: %d, want %d", e, bumped)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  etcdstore.Config
		ok   bool
	}{
		{"endpoints only", etcdstore.Config{Endpoints: []string{"http://127.0.0.1:2379"}}, true},
		{"no endpoints", etcdstore.Config{}, false},
		{"empty endpoint", etcdstore.Config{Endpoints: []string{" "}}, false},
		{"cert without key", etcdstore.Config{Endpoints: []string{"x"}, TLS: etcdstore.TLS{Cert: "c.pem"}}, false},
		{"password without user", etcdstore.Config{Endpoints: []string{"x"}, Password: "p"}, false},
		{"password twice", etcdstore.Config{Endpoints: []string{"x"}, Username: "u", Password: "p", PasswordFile: "f"}, false},
		{"negative timeout", etcdstore.Config{Endpoints: []string{"x"}, RequestTimeout: -1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate("etcd")
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, etcdstore.ErrConfig)) {
				t.Fatalf("Validate: %v, want ok=%v (ErrConfig otherwise)", err, tc.ok)
			}
		})
	}
}
