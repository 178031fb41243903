package lease_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/protocol"
)

// heapAlloc is the live heap after a full collection.
func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestUnboundedDomainMap (issue 11 item 7): a flood of reads of unknown
// domains leaves the heap flat and creates no store record.
func TestUnboundedDomainMap(t *testing.T) {
	signer, _ := leasetest.MustSigner(t)
	c, st, _ := leasetest.MustController(t, lease.Config{Signer: signer})
	ctx := context.Background()
	foreign, err := signer.Sign(fenceToken("ghost-1"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	before := heapAlloc()
	for i := range n {
		name := fmt.Sprintf("ghost-%d", i)
		if r := c.Do(ctx, protocol.OpGet, name, protocol.Request{}); r.Code != protocol.CodeReleased {
			t.Fatalf("get %s: %+v", name, r)
		}
	}
	for _, op := range []protocol.LeaseOp{protocol.OpRenew, protocol.OpRelease} {
		if r := c.Do(ctx, op, "ghost-1", protocol.Request{Token: foreign.Raw}); r.Code != protocol.CodeNotHolder {
			t.Fatalf("%s of an unknown domain: %+v, want not_holder", op, r)
		}
	}
	after := heapAlloc()
	t.Logf("heap %d KiB → %d KiB", before>>10, after>>10)
	if grew := int64(after) - int64(before); grew > 8<<20 {
		t.Fatalf("heap grew by %d KiB over %d gets of unknown domains, want < 8 MiB", grew>>10, n)
	}
	for _, name := range []string{"ghost-0", "ghost-1", fmt.Sprintf("ghost-%d", n-1)} {
		if rec, err := st.Load(ctx, name); err != nil || rec.Version != 0 {
			t.Fatalf("a read of %s created a store record: %+v, %v", name, rec, err)
		}
	}
	runtime.KeepAlive(c) // the controller (and its map) is live until here
}

func fenceToken(domain string) fence.Token {
	return fence.Token{Domain: domain, Epoch: 1, Seq: 1, Holder: "ghost", IssuedAt: 1, TTLms: 1000}
}

// TestDomainAllowList (issue 11 item 7): only domains matching the
// domains patterns are served; others are bad_request naming the setting,
// and create nothing.
func TestDomainAllowList(t *testing.T) {
	c, st, _ := leasetest.MustController(t, lease.Config{Domains: []string{"press-*", "line[0-9]"}})
	ctx := context.Background()
	for _, name := range []string{"press-7", "line3"} {
		leasetest.Want(t, leasetest.Acquire(t, leasetest.Direct{C: c}, name, "alice", time.Minute), protocol.CodeGranted)
	}
	for _, op := range []protocol.LeaseOp{protocol.OpAcquire, protocol.OpGet} {
		r := c.Do(ctx, op, "oven", protocol.Request{RequestID: leasetest.ID(), Holder: "alice", TTLms: 1000})
		if r.Code != protocol.CodeBadRequest || !strings.Contains(r.Message, `"oven"`) || !strings.Contains(r.Message, "press-*") {
			t.Fatalf("%s of a domain outside the allow-list: %+v, want bad_request naming it and the patterns", op, r)
		}
	}
	if rec, _ := st.Load(ctx, "oven"); rec.Version != 0 {
		t.Fatal("a refused domain got a store record")
	}
	for _, bad := range [][]string{{"press-["}, {""}, {"a/b"}} {
		_, err := lease.New(ctx, lease.Config{Store: st, Signer: mustSigner(t), Domains: bad})
		if !errors.Is(err, lease.ErrConfig) {
			t.Errorf("domains %q: %v, want lease.ErrConfig", bad, err)
		}
	}
}

// TestMaxDomains (issue 11 item 7): beyond MaxDomains domains in memory
// an acquire of a new domain is busy; idle domains (released, expired)
// leave memory and make room, their store records (and seq) stay.
func TestMaxDomains(t *testing.T) {
	clock := leasetest.NewClock()
	c, st, keys := leasetest.MustController(t, lease.Config{Clock: clock, MaxDomains: 2})
	env := leasetest.Env{Client: leasetest.Direct{C: c}, Clock: clock, Keys: keys}
	ctx := context.Background()
	a := leasetest.Verified(t, env, leasetest.Acquire(t, env.Client, "a", "alice", time.Minute))
	leasetest.Verified(t, env, leasetest.Acquire(t, env.Client, "b", "alice", time.Second))
	r := leasetest.Acquire(t, env.Client, "c", "alice", time.Minute)
	if r.Code != protocol.CodeBusy || r.OK || !strings.Contains(r.Message, "max_domains") {
		t.Fatalf("acquire beyond max domains: %+v, want busy naming max_domains", r)
	}
	clock.Advance(2 * time.Second) // b expires: idle
	leasetest.Verified(t, env, leasetest.Acquire(t, env.Client, "c", "alice", time.Minute))
	leasetest.Want(t, c.Do(ctx, protocol.OpRelease, "a", protocol.Request{Token: a.Raw}), protocol.CodeReleased)
	if n := c.Domains(); n != 1 {
		t.Fatalf("%d domains in memory after a release and an expiry, want 1 (c)", n)
	}
	a2 := leasetest.Verified(t, env, leasetest.Acquire(t, env.Client, "a", "bob", time.Minute))
	leasetest.Newer(t, a, a2) // the evicted domain's seq came back from the store
	if rec, _ := st.Load(ctx, "b"); rec.Seq != 1 {
		t.Fatalf("evicted domain b's record: %+v, want it kept with seq 1", rec)
	}
}

func mustSigner(t *testing.T) *fence.Signer {
	s, _ := leasetest.MustSigner(t)
	return s
}
