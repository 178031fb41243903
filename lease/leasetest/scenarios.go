package leasetest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// Client sends one lease request through a transport and returns the
// response; it fails t if the transport does.
type Client interface {
	Do(t testing.TB, op protocol.LeaseOp, domain string, req protocol.Request) protocol.Response
}

// Env is one controller behind a transport, with its clock and keys.
type Env struct {
	Client Client
	Clock  *Clock
	Keys   *fence.KeyRing
	// Announced, if set, returns the token last published on domain's
	// grant topic, waiting until it is want (or failing t).
	Announced func(t testing.TB, domain, want string)
}

// Run runs the lease semantics scenarios; newEnv starts a fresh controller
// for each.
func Run(t *testing.T, newEnv func(t *testing.T) Env) {
	scenarios := []struct {
		name string
		run  func(t *testing.T, e Env)
	}{
		{"competing holders", competing},
		{"expiry", expiry},
		{"renew after expiry refused", renewAfterExpiry},
		{"renew keeps the token", renewKeeps},
		{"release", release},
		{"supersede by same holder", supersede},
		{"idempotent retry", retry},
		{"wait hand-over on release", waitRelease},
		{"wait hand-over on expiry", waitExpiry},
		{"wait times out", waitTimeout},
	}
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) { s.run(t, newEnv(t)) })
	}
}

var reqSeq atomic.Int64

// ID returns a fresh request id.
func ID() string { return fmt.Sprintf("r%d", reqSeq.Add(1)) }

// Acquire sends an acquire with a fresh request id.
func Acquire(t testing.TB, c Client, domain, holder string, ttl time.Duration) protocol.Response {
	return c.Do(t, protocol.OpAcquire, domain, protocol.Request{RequestID: ID(), Holder: holder, TTLms: uint64(ttl.Milliseconds())})
}

func renew(t testing.TB, c Client, domain, token string) protocol.Response {
	return c.Do(t, protocol.OpRenew, domain, protocol.Request{RequestID: ID(), Token: token})
}

func releaseOp(t testing.TB, c Client, domain, token string) protocol.Response {
	return c.Do(t, protocol.OpRelease, domain, protocol.Request{RequestID: ID(), Token: token})
}

// Want fails t unless resp has code (and OK as that code implies).
func Want(t testing.TB, resp protocol.Response, code protocol.Code) {
	t.Helper()
	if resp.Code != code {
		t.Fatalf("code %q (%s), want %q; response %+v", resp.Code, resp.Message, code, resp)
	}
}

// Verified returns the verified token of a granted response.
func Verified(t testing.TB, e Env, resp protocol.Response) fence.Token {
	t.Helper()
	Want(t, resp, protocol.CodeGranted)
	if !resp.OK {
		t.Fatalf("granted but not ok: %+v", resp)
	}
	tok, err := e.Keys.Verify(resp.Token)
	if err != nil {
		t.Fatalf("granted token does not verify: %v", err)
	}
	return tok
}

// Newer fails t unless b is strictly newer than a.
func Newer(t testing.TB, a, b fence.Token) {
	t.Helper()
	if c, err := b.Compare(a); err != nil || c <= 0 {
		t.Fatalf("token %v is not newer than %v (%v)", b, a, err)
	}
}

func competing(t *testing.T, e Env) {
	a := Verified(t, e, Acquire(t, e.Client, "d", "alice", time.Second))
	if e.Announced != nil {
		e.Announced(t, "d", a.Raw)
	}
	r := Acquire(t, e.Client, "d", "bob", time.Second)
	Want(t, r, protocol.CodeHeld)
	if r.OK || r.Holder != "alice" || r.ExpiresInMs <= 0 || r.ExpiresInMs > 1000 || r.Token != "" {
		t.Fatalf("held response %+v: want holder alice, 0 < expires_in_ms <= 1000, no token", r)
	}
	g := e.Client.Do(t, protocol.OpGet, "d", protocol.Request{RequestID: ID()})
	if g.Code != protocol.CodeHeld || g.Holder != "alice" || g.Token != a.Raw {
		t.Fatalf("get: %+v", g)
	}
}

func expiry(t *testing.T, e Env) {
	a := Verified(t, e, Acquire(t, e.Client, "d", "alice", time.Second))
	e.Clock.Advance(999 * time.Millisecond)
	Want(t, Acquire(t, e.Client, "d", "bob", time.Second), protocol.CodeHeld)
	e.Clock.Advance(2 * time.Millisecond)
	b := Verified(t, e, Acquire(t, e.Client, "d", "bob", time.Second))
	Newer(t, a, b)
	if e.Announced != nil {
		e.Announced(t, "d", b.Raw)
	}
	Want(t, renew(t, e.Client, "d", a.Raw), protocol.CodeNotHolder)
}

func renewAfterExpiry(t *testing.T, e Env) {
	a := Verified(t, e, Acquire(t, e.Client, "d", "alice", time.Second))
	e.Clock.Advance(1001 * time.Millisecond)
	r := renew(t, e.Client, "d", a.Raw)
	Want(t, r, protocol.CodeExpired)
	if r.OK {
		t.Fatal("expired renew is ok")
	}
	b := Verified(t, e, Acquire(t, e.Client, "d", "alice", time.Second))
	Newer(t, a, b)
}

func renewKeeps(t *testing.T, e Env) {
	a := Verified(t, e, Acquire(t, e.Client, "d", "alice", time.Second))
	for range 3 {
		e.Clock.Advance(800 * time.Millisecond)
		r := renew(t, e.Client, "d", a.Raw)
		Want(t, r, protocol.CodeRenewed)
		if r.Token != a.Raw || r.ExpiresInMs != 1000 {
			t.Fatalf("renew: %+v, want the same token and 1000 ms", r)
		}
	}
	Want(t, Acquire(t, e.Client, "d", "bob", time.Second), protocol.CodeHeld)
	r := e.Client.Do(t, protocol.OpRenew, "d", protocol.Request{RequestID: ID(), Token: a.Raw, TTLms: 5000})
	if r.Code != protocol.CodeRenewed || r.ExpiresInMs != 5000 || r.Token != a.Raw {
		t.Fatalf("renew with ttl: %+v", r)
	}
	e.Clock.Advance(4 * time.Second)
	Want(t, Acquire(t, e.Client, "d", "bob", time.Second), protocol.CodeHeld)
}

func release(t *testing.T, e Env) {
	a := Verified(t, e, Acquire(t, e.Client, "d", "alice", time.Minute))
	Want(t, releaseOp(t, e.Client, "d", a.Raw), protocol.CodeReleased)
	g := e.Client.Do(t, protocol.OpGet, "d", protocol.Request{RequestID: ID()})
	if g.Code != protocol.CodeReleased || !g.OK {
		t.Fatalf("get after release: %+v", g)
	}
	Want(t, releaseOp(t, e.Client, "d", a.Raw), protocol.CodeNotHolder)
	Want(t, renew(t, e.Client, "d", a.Raw), protocol.CodeNotHolder)
	b := Verified(t, e, Acquire(t, e.Client, "d", "bob", time.Minute))
	Newer(t, a, b)
	r := releaseOp(t, e.Client, "d", a.Raw)
	if r.Code != protocol.CodeNotHolder || r.Holder != "bob" {
		t.Fatalf("release of an old lease: %+v", r)
	}
}

func supersede(t *testing.T, e Env) {
	a1 := Verified(t, e, Acquire(t, e.Client, "d", "alice", time.Minute))
	a2 := Verified(t, e, Acquire(t, e.Client, "d", "alice", time.Minute))
	Newer(t, a1, a2)
	Want(t, renew(t, e.Client, "d", a1.Raw), protocol.CodeNotHolder)
	Want(t, renew(t, e.Client, "d", a2.Raw), protocol.CodeRenewed)
	Want(t, releaseOp(t, e.Client, "d", a1.Raw), protocol.CodeNotHolder)
	Want(t, Acquire(t, e.Client, "d", "bob", time.Second), protocol.CodeHeld)
}

func retry(t *testing.T, e Env) {
	req := protocol.Request{RequestID: ID(), Holder: "alice", TTLms: 1000}
	a := Verified(t, e, e.Client.Do(t, protocol.OpAcquire, "d", req))
	e.Clock.Advance(300 * time.Millisecond)
	again := e.Client.Do(t, protocol.OpAcquire, "d", req)
	if again.Code != protocol.CodeGranted || again.Token != a.Raw || again.ExpiresInMs > 700 {
		t.Fatalf("retry: %+v, want the same token with <= 700 ms left", again)
	}
	other := req
	other.Holder = "bob"
	Want(t, e.Client.Do(t, protocol.OpAcquire, "d", other), protocol.CodeBadRequest)
	Want(t, releaseOp(t, e.Client, "d", a.Raw), protocol.CodeReleased)
	late := e.Client.Do(t, protocol.OpAcquire, "d", req)
	if late.Code != protocol.CodeExpired || late.OK || late.Token != "" {
		t.Fatalf("retry after release: %+v, want expired", late)
	}
	g := e.Client.Do(t, protocol.OpGet, "d", protocol.Request{RequestID: ID()})
	Want(t, g, protocol.CodeReleased) // the late retry granted nothing
}

// startWaiter acquires for bob with a wait, in the background, and returns
// once the controller is waiting (its clock holds a timer).
func startWaiter(t *testing.T, e Env, wait time.Duration) <-chan protocol.Response {
	before := e.Clock.Timers()
	done := make(chan protocol.Response, 1)
	go func() {
		done <- e.Client.Do(t, protocol.OpAcquire, "d", protocol.Request{RequestID: ID(), Holder: "bob",
			TTLms: 1000, WaitMs: uint64(wait.Milliseconds())})
	}()
	for e.Clock.Timers() == before {
		select {
		case r := <-done:
			t.Fatalf("waiting acquire answered at once: %+v", r)
		case <-time.After(time.Millisecond):
		}
	}
	return done
}

func waitRelease(t *testing.T, e Env) {
	a := Verified(t, e, Acquire(t, e.Client, "d", "alice", time.Minute))
	done := startWaiter(t, e, 30*time.Second)
	// Other requests are answered while bob waits.
	Want(t, Acquire(t, e.Client, "d", "carol", time.Second), protocol.CodeHeld)
	Want(t, releaseOp(t, e.Client, "d", a.Raw), protocol.CodeReleased)
	b := Verified(t, e, <-done)
	if b.Holder != "bob" {
		t.Fatalf("hand-over went to %q", b.Holder)
	}
	Newer(t, a, b)
}

func waitExpiry(t *testing.T, e Env) {
	a := Verified(t, e, Acquire(t, e.Client, "d", "alice", 2*time.Second))
	done := startWaiter(t, e, 30*time.Second)
	e.Clock.Advance(2001 * time.Millisecond)
	b := Verified(t, e, <-done)
	Newer(t, a, b)
}

func waitTimeout(t *testing.T, e Env) {
	Verified(t, e, Acquire(t, e.Client, "d", "alice", time.Minute))
	done := startWaiter(t, e, 5*time.Second)
	e.Clock.Advance(5001 * time.Millisecond)
	r := <-done
	if r.Code != protocol.CodeHeld || r.Holder != "alice" {
		t.Fatalf("wait timeout: %+v", r)
	}
}
