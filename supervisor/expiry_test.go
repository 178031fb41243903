package supervisor_test

import (
	"testing"
	"time"

	"github.com/fencegate/fencegate/supervisor"
)

// TestDoneClosesAtValidUntil: with every renewal failing (the client is
// partitioned from the broker right after the grant), Done closes when
// ValidUntil passes — never before it, and without the retry gap of a
// tenth of the TTL after it. The slack (250 ms) is generous for a loaded
// machine yet half the gap the old renewal loop left (TTL/10 = 500 ms).
func TestDoneClosesAtValidUntil(t *testing.T) {
	const ttl, slack = 5 * time.Second, 250 * time.Millisecond
	s := startStack(t, 0)
	p := startProxy(t, s.Broker.Addr())
	a := dial(t, "tcp://"+p.addr(), "A")
	l, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	p.pause()
	t.Cleanup(p.resume)
	until := l.ValidUntil()
	select {
	case <-l.Done():
		if now := time.Now(); now.Before(until) {
			t.Fatalf("Done closed %v before ValidUntil", until.Sub(now))
		}
	case <-time.After(time.Until(until) + slack):
		t.Fatalf("Done still open %v after ValidUntil", slack)
	}
	if !l.ValidUntil().Equal(until) {
		t.Fatalf("ValidUntil moved from %v to %v without a confirmed renewal", until, l.ValidUntil())
	}
}
