package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/protocol"
)

// TestWaitingAcquiresFIFO (issue 11): acquires waiting for a held domain
// get it in the order they arrived, as etcd's concurrency.Mutex serves
// waiters by revision: each release hands the domain to the oldest waiter,
// and an acquire arriving meanwhile does not pass the queue.
func TestWaitingAcquiresFIFO(t *testing.T) {
	clock := leasetest.NewClock()
	c, _, keys := leasetest.MustController(t, lease.Config{Clock: clock})
	env := leasetest.Env{Client: leasetest.Direct{C: c}, Clock: clock, Keys: keys}
	token := leasetest.Verified(t, env, leasetest.Acquire(t, env.Client, "d", "holder", time.Minute)).Raw
	const n = 6
	done := make([]chan protocol.Response, n)
	for i := range done {
		done[i] = queueWaiter(t, c, clock, fmt.Sprintf("w%d", i))
	}
	for i := range n {
		leasetest.Want(t, c.Do(context.Background(), protocol.OpRelease, "d", protocol.Request{Token: token}), protocol.CodeReleased)
		// A newcomer right after the release does not pass the queue.
		leasetest.Want(t, leasetest.Acquire(t, env.Client, "d", "carol", time.Minute), protocol.CodeHeld)
		got, r := firstAnswer(t, done[i:])
		if got != 0 {
			t.Fatalf("release %d handed the domain to waiter w%d (%+v), want w%d: not first come, first served", i, i+got, r, i)
		}
		tok := leasetest.Verified(t, env, r)
		if tok.Holder != fmt.Sprintf("w%d", i) {
			t.Fatalf("waiter w%d got a token of %q", i, tok.Holder)
		}
		token = r.Token
	}
}

// queueWaiter starts an acquire for holder waiting up to 50 s and returns
// once it waits (the clock holds one more timer).
func queueWaiter(t *testing.T, c *lease.Controller, clock *leasetest.Clock, holder string) chan protocol.Response {
	before := clock.Timers()
	ch := make(chan protocol.Response, 1)
	go func() {
		ch <- c.Do(context.Background(), protocol.OpAcquire, "d", protocol.Request{RequestID: leasetest.ID(), Holder: holder,
			TTLms: 60_000, WaitMs: 50_000})
	}()
	deadline := time.After(10 * time.Second)
	for clock.Timers() == before {
		select {
		case r := <-ch:
			t.Fatalf("%s answered at once: %+v", holder, r)
		case <-deadline:
			t.Fatalf("%s is not waiting after 10 s", holder)
		case <-time.After(time.Millisecond):
		}
	}
	return ch
}

// firstAnswer returns the index of the first of chans to answer, and its
// answer.
func firstAnswer(t *testing.T, chans []chan protocol.Response) (int, protocol.Response) {
	deadline := time.After(10 * time.Second)
	for {
		for i, ch := range chans {
			select {
			case r := <-ch:
				return i, r
			default:
			}
		}
		select {
		case <-deadline:
			t.Fatal("no waiter answered in 10 s")
		case <-time.After(time.Millisecond):
		}
	}
}
