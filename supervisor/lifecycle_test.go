package supervisor_test

import (
	"errors"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"

	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// pahoDispatch is paho's message router, which outlives Disconnect briefly.
var pahoDispatch = goleak.IgnoreTopFunction("github.com/eclipse/paho.mqtt.golang.(*router).matchAndDispatch")

// renewalInFlight dials a client through a proxy, acquires a lease and
// makes the proxy hold back the broker's answers until the lease's first
// renewal reached the broker. It
// returns the proxy, client and lease with the goroutines running before the client was
// dialed and those running once the lease was granted.
func renewalInFlight(t *testing.T) (p *proxy, c *supervisor.Client, l *supervisor.Lease, beforeDial, granted goleak.Option) {
	t.Helper()
	s := startStack(t, 0)
	p = startProxy(t, s.Broker.Addr())
	renewals := watchRenewals(t, s.URL(), "plant")
	beforeDial = goleak.IgnoreCurrent()
	c = dialNoCleanup(t, "tcp://"+p.addr(), "A")
	l, err := c.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 6 * time.Second})
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	granted = goleak.IgnoreCurrent()
	p.deafen()
	t.Cleanup(p.resume)
	select {
	case <-renewals: // the renewal (sent after a third of the TTL) waits up to half the TTL for an answer
	case <-time.After(30 * time.Second):
		c.Close()
		t.Fatal("no renewal was sent")
	}
	return p, c, l, beforeDial, granted
}

// watchRenewals returns a channel that gets a value for each renewal of
// domain the broker receives.
func watchRenewals(t *testing.T, broker, domain string) <-chan struct{} {
	t.Helper()
	ch := make(chan struct{}, 16)
	c, err := mqtt.Dial(ctxT(t, 10*time.Second), mqtt.Config{Broker: broker, ClientID: "renewals-" + domain},
		map[string]paho.MessageHandler{protocol.Topics{}.Lease(domain, "renew"): func(paho.Client, paho.Message) {
			select {
			case ch <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(0) })
	return ch
}

// TestLifecyclesRenewalStartsNoGoroutine: a renewal in flight runs in the
// lease's keepalive goroutine alone — no helper goroutine per renewal.
func TestLifecyclesRenewalStartsNoGoroutine(t *testing.T) {
	_, c, _, _, granted := renewalInFlight(t)
	defer c.Close()
	if err := goleak.Find(granted, pahoDispatch); err != nil {
		t.Fatalf("goroutines started for a renewal: %v", err)
	}
}

// TestLifecyclesCloseWaitsForKeepalive: Close, with a renewal waiting for
// an answer that cannot come, returns only once the lease is lost and
// every goroutine the client started (keepalive, connections) ended.
func TestLifecyclesCloseWaitsForKeepalive(t *testing.T) {
	p, c, l, beforeDial, _ := renewalInFlight(t)
	c.Close()
	select {
	case <-l.Done():
	default:
		t.Fatal("Close returned with the lease still held")
	}
	p.resume() // the proxy and the broker let go of the closed connection
	if err := l.Err(); !errors.Is(err, supervisor.ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", err)
	}
	if err := goleak.Find(beforeDial, pahoDispatch); err != nil {
		t.Fatal(err)
	}
}

// TestLifecyclesReleaseWaitsForKeepalive: Release, with a renewal waiting
// for an answer that cannot come, returns (no answer to the release
// either) only once the lease's keepalive goroutine ended.
func TestLifecyclesReleaseWaitsForKeepalive(t *testing.T) {
	_, c, l, _, granted := renewalInFlight(t)
	defer c.Close()
	err := l.Release(ctxT(t, 500*time.Millisecond))
	if !errors.Is(err, supervisor.ErrNoAnswer) {
		t.Fatalf("Release through a partition: %v, want ErrNoAnswer", err)
	}
	if err := goleak.Find(granted, pahoDispatch, goleak.IgnoreTopFunction("time.Sleep")); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l.Err(), supervisor.ErrLeaseLost) {
		t.Fatalf("Err = %v after Release", l.Err())
	}
}
