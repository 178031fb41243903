package leasetest

import (
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/protocol"
)

// Replicas are two controllers on one Shared store, sharing a clock and a
// signing key: what two controller processes on one etcd cluster are.
type Replicas struct {
	A, B  Env
	Clock *Clock
}

// RunReplicas runs the scenarios of several controllers on one shared
// store. open returns a store handle on one shared backing; it is called
// twice per scenario (once per replica) and the handles are closed in
// t.Cleanup.
func RunReplicas(t *testing.T, newBacking func(t testing.TB) Opener) {
	scenarios := []struct {
		name string
		run  func(t *testing.T, r Replicas)
	}{
		{"a grant is held on the other replica", replicaHeld},
		{"a renewal restarts the other replica's count", replicaRenew},
		{"a release frees the domain on the other replica", replicaRelease},
		{"a retry on the other replica gets the same grant", replicaRetry},
		{"racing acquires on both replicas: one grant", replicaRace},
		{"a waiter sees a release on the other replica", replicaWaiter},
	}
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) { s.run(t, newReplicas(t, newBacking(t))) })
	}
}

func newReplicas(t *testing.T, open Opener) Replicas {
	clock := NewClock()
	signer, keys := MustSigner(t)
	env := func() Env {
		st := open(t)
		t.Cleanup(func() { mustClose(t, st) })
		c, _ := MustControllerOn(t, lease.Config{Clock: clock, Signer: signer}, st)
		return Env{Client: Direct{C: c}, Clock: clock, Keys: keys}
	}
	return Replicas{A: env(), B: env(), Clock: clock}
}

func replicaHeld(t *testing.T, r Replicas) {
	a := Verified(t, r.A, Acquire(t, r.A.Client, "d", "alice", time.Second))
	h := Acquire(t, r.B.Client, "d", "bob", time.Second)
	if h.Code != protocol.CodeHeld || h.Holder != "alice" {
		t.Fatalf("acquire on B: %+v, want held by alice", h)
	}
	g := r.B.Client.Do(t, protocol.OpGet, "d", protocol.Request{RequestID: ID()})
	if g.Code != protocol.CodeHeld || g.Token != a.Raw {
		t.Fatalf("get on B: %+v, want alice's token", g)
	}
}

func replicaRenew(t *testing.T, r Replicas) {
	a := Verified(t, r.A, Acquire(t, r.A.Client, "d", "alice", time.Second))
	Want(t, Acquire(t, r.B.Client, "d", "bob", time.Second), protocol.CodeHeld) // B starts counting
	r.Clock.Advance(800 * time.Millisecond)
	Want(t, renew(t, r.A.Client, "d", a.Raw), protocol.CodeRenewed)
	r.Clock.Advance(800 * time.Millisecond)
	// B's first count would have ended now; it first reads the renewed
	// record here and counts its full TTL from this read.
	h := Acquire(t, r.B.Client, "d", "bob", time.Second)
	if h.Code != protocol.CodeHeld || h.ExpiresInMs != 1000 {
		t.Fatalf("acquire on B after the renewal: %+v, want held for 1000 ms", h)
	}
	r.Clock.Advance(999 * time.Millisecond)
	Want(t, Acquire(t, r.B.Client, "d", "bob", time.Second), protocol.CodeHeld)
	r.Clock.Advance(2 * time.Millisecond)
	b := Verified(t, r.B, Acquire(t, r.B.Client, "d", "bob", time.Second))
	Newer(t, a, b)
	Want(t, renew(t, r.A.Client, "d", a.Raw), protocol.CodeNotHolder)
}

func replicaRelease(t *testing.T, r Replicas) {
	a := Verified(t, r.A, Acquire(t, r.A.Client, "d", "alice", time.Minute))
	Want(t, Acquire(t, r.B.Client, "d", "bob", time.Second), protocol.CodeHeld)
	Want(t, releaseOp(t, r.A.Client, "d", a.Raw), protocol.CodeReleased)
	b := Verified(t, r.B, Acquire(t, r.B.Client, "d", "bob", time.Second))
	Newer(t, a, b)
	Want(t, releaseOp(t, r.A.Client, "d", b.Raw), protocol.CodeReleased) // A sees B's grant
}

func replicaRetry(t *testing.T, r Replicas) {
	req := protocol.Request{RequestID: ID(), Holder: "alice", TTLms: 1000}
	a := Verified(t, r.A, r.A.Client.Do(t, protocol.OpAcquire, "d", req))
	again := r.B.Client.Do(t, protocol.OpAcquire, "d", req)
	if again.Code != protocol.CodeGranted || again.Token != a.Raw {
		t.Fatalf("retry on B: %+v, want alice's token again", again)
	}
}

func replicaRace(t *testing.T, r Replicas) {
	for i := range 10 {
		domain := "race" + string(rune('a'+i))
		var wg sync.WaitGroup
		resps := make([]protocol.Response, 2)
		for j, env := range []Env{r.A, r.B} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resps[j] = Acquire(t, env.Client, domain, []string{"alice", "bob"}[j], time.Minute)
			}()
		}
		wg.Wait()
		granted := 0
		for _, resp := range resps {
			switch resp.Code {
			case protocol.CodeGranted:
				granted++
			case protocol.CodeHeld:
			default:
				t.Fatalf("%s: %+v, want granted or held", domain, resp)
			}
		}
		if granted != 1 {
			t.Fatalf("%s: %d grants from racing replicas, want 1: %+v", domain, granted, resps)
		}
	}
}

func replicaWaiter(t *testing.T, r Replicas) {
	a := Verified(t, r.A, Acquire(t, r.A.Client, "d", "alice", time.Minute))
	done := startWaiter(t, r.B, 30*time.Second)
	Want(t, releaseOp(t, r.A.Client, "d", a.Raw), protocol.CodeReleased)
	for {
		r.Clock.Advance(lease.SharedPoll)
		select {
		case resp := <-done:
			Newer(t, a, Verified(t, r.B, resp))
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}
