package supervisor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/mqtttest"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
)

// TestAttackWaitHandoverSucceedsForReleasedLease breaks the SDK's promise
// (docs: WaitHandover returns "the lease's error if it is lost
// meanwhile"; I2 at the SDK level: a holder is never told it owns a device
// after its lease ended): once a state fenced at lease L1 is known to the
// client's shared state watch (kept open here by a later lease L2 of the
// same client waiting on the same device), WaitHandover on the released
// L1 finds both its primed state channel and l.done ready, and Go's select
// picks at random — so it often answers nil, "hand-over done", for a lease
// that is already released. judgeHandover never checks l.Err().
func TestAttackWaitHandoverSucceedsForReleasedLease(t *testing.T) {
	s := startStack(t, 0)
	ghost := mqtttest.NewSupervisor(t, s.URL(), mqtttest.Options{ClientID: "ghost-agent"})
	a := dial(t, s.URL(), "A")
	l1, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	publishState(t, ghost, "ghost1", "plant", l1.Fence().Fence())
	if err := l1.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	l2, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	holdWatch(t, l2, "ghost1")
	awaitSubscribed(t, s, protocol.Topics{}.DeviceState("ghost1"), "sup-A")
	wins := 0
	for range 200 {
		err := l1.WaitHandover(ctxT(t, 10*time.Second), "ghost1")
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, supervisor.ErrLeaseLost):
			t.Fatalf("WaitHandover on a released lease: %v, want ErrLeaseLost", err)
		}
	}
	if wins > 0 {
		t.Fatalf("WaitHandover reported the hand-over done for a released lease in %d of 200 calls", wins)
	}
}

// holdWatch keeps a WaitHandover of l on device running (it never
// completes: the device is fenced below l) until the test ends.
func holdWatch(t *testing.T, l *supervisor.Lease, device string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.WaitHandover(ctx, device) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("held WaitHandover: %v, want its ctx's cancellation", err)
		}
	})
}

// TestAttackAcquireAfterWaitReturnsDeadLease: a lease that queued (Wait)
// longer than its TTL is granted fresh by the controller, yet Acquire
// returns it with ValidUntil already in the past (validity counts from
// the request's send time, before the queueing), so it is lost at once:
// the holder cannot send under a lease the controller holds for a full
// TTL, and nobody else can acquire it meanwhile. Safety holds (Send
// refuses); liveness does not: Acquire reports success for a lease that
// is useless on arrival.
func TestAttackAcquireAfterWaitReturnsDeadLease(t *testing.T) {
	s := startStack(t, 0)
	a, b := dial(t, s.URL(), "A"), dial(t, s.URL(), "B")
	la, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() {
		// The attack's clock: A keeps the domain longer than B's TTL.
		time.Sleep(1500 * time.Millisecond)
		released <- la.Release(ctxT(t, 10*time.Second))
	}()
	t.Cleanup(func() {
		if err := <-released; err != nil {
			t.Errorf("A's release: %v", err)
		}
	})
	lb, err := b.Acquire(ctxT(t, 30*time.Second), "plant", supervisor.AcquireOptions{TTL: time.Second, Wait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	left := time.Until(lb.ValidUntil())
	if _, err := lb.Send(ctxT(t, 10*time.Second), "pump1", "set", map[string]int{"value": 1}); err != nil && !errors.Is(err, supervisor.ErrLeaseLost) {
		t.Fatalf("Send under the lease: %v", err)
	}
	if left <= 0 {
		t.Fatalf("Acquire returned a freshly granted lease (TTL 1s) already %v past its ValidUntil; Err %v", -left, lb.Err())
	}
}
