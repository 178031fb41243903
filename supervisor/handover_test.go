package supervisor_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/mqtttest"
	"github.com/fencegate/fencegate/internal/stack"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// The hand-over tests publish the retained state of devices no agent owns
// ("ghost…"), as an agent would, so that each state arrives exactly when
// the test wants it.

// TestWaitHandoverChecksDomainAndHolder: a state at this lease's position
// but of another holder or another domain is not this lease's hand-over,
// and a newer position of another domain does not make it stale (nor the
// lease lost).
func TestWaitHandoverChecksDomainAndHolder(t *testing.T) {
	s := startStack(t, 0)
	ghost := mqtttest.NewSupervisor(t, s.URL(), mqtttest.Options{ClientID: "ghost-agent"})
	a := dial(t, s.URL(), "A")
	l, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tok := l.Fence()
	tests := []struct {
		name   string
		domain string
		fence  fence.Fence
		want   error
	}{
		{name: "same position, other holder", fence: fence.Fence{Epoch: tok.Epoch, Seq: tok.Seq, Holder: "mallory"}, want: supervisor.ErrWrongDomain},
		{name: "same position and holder, other domain", domain: "line2", fence: tok.Fence(), want: supervisor.ErrWrongDomain},
		{name: "newer position, other domain", domain: "line2", fence: fence.Fence{Epoch: tok.Epoch, Seq: tok.Seq + 5, Holder: "B"}, want: supervisor.ErrWrongDomain},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			device := "ghost" + string(rune('a'+i))
			publishState(t, ghost, device, tc.domain, tc.fence)
			err := l.WaitHandover(ctxT(t, 10*time.Second), device)
			if !errors.Is(err, tc.want) {
				t.Fatalf("WaitHandover: %v, want %v", err, tc.want)
			}
			if l.Err() != nil {
				t.Fatalf("lease lost by another domain's state: %v", l.Err())
			}
		})
	}
}

// TestWaitHandoverStaleMarksLeaseLost: a device fenced at a newer
// position of the lease's domain (with or without a domain field in its
// state) answers ErrStale and marks the lease lost, as a stale command
// result does.
func TestWaitHandoverStaleMarksLeaseLost(t *testing.T) {
	for _, domain := range []string{"", "plant"} {
		t.Run("domain "+domain, func(t *testing.T) {
			s := startStack(t, 0)
			ghost := mqtttest.NewSupervisor(t, s.URL(), mqtttest.Options{ClientID: "ghost-agent"})
			a := dial(t, s.URL(), "A")
			l, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			publishState(t, ghost, "ghost1", domain, fence.Fence{Epoch: l.Fence().Epoch, Seq: l.Fence().Seq + 1, Holder: "B"})
			if err := l.WaitHandover(ctxT(t, 10*time.Second), "ghost1"); !errors.Is(err, supervisor.ErrStale) {
				t.Fatalf("WaitHandover: %v, want ErrStale", err)
			}
			if !errors.Is(l.Err(), supervisor.ErrLeaseLost) {
				t.Fatalf("lease Err after a stale hand-over: %v, want ErrLeaseLost", l.Err())
			}
			awaitDone(t, l)
		})
	}
}

// TestWaitHandoverConcurrentCalls: two WaitHandover calls for one device
// on one client share its state subscription: the one that gives up first
// does not take the other's away.
func TestWaitHandoverConcurrentCalls(t *testing.T) {
	s := startStack(t, 0)
	ghost := mqtttest.NewSupervisor(t, s.URL(), mqtttest.Options{ClientID: "ghost-agent"})
	a := dial(t, s.URL(), "A")
	l, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- l.WaitHandover(ctxT(t, 20*time.Second), "ghost1") }()
	awaitSubscribed(t, s, protocol.Topics{}.DeviceState("ghost1"), "sup-A")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := l.WaitHandover(ctx, "ghost1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second call: %v, want its ctx's deadline", err)
	}
	publishState(t, ghost, "ghost1", "plant", l.Fence().Fence())
	if err := <-first; err != nil {
		t.Fatalf("first call after the second gave up: %v, want the hand-over", err)
	}
}

// TestWaitHandoverAcrossReconnect: a WaitHandover in progress when the
// client reconnects still sees the hand-over (its subscription is renewed).
func TestWaitHandoverAcrossReconnect(t *testing.T) {
	s := startStack(t, 0)
	p := startProxy(t, s.Broker.Addr())
	ghost := mqtttest.NewSupervisor(t, s.URL(), mqtttest.Options{ClientID: "ghost-agent"})
	a := dial(t, "tcp://"+p.addr(), "A")
	l, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.WaitHandover(ctxT(t, 25*time.Second), "ghost1") }()
	topic := protocol.Topics{}.DeviceState("ghost1")
	awaitSubscribed(t, s, topic, "sup-A")
	p.kick()
	// A lease round trip proves the client is back (clean session: the
	// broker forgot its subscriptions).
	if _, err := a.LeaseRequest(ctxT(t, 20*time.Second), "plant", protocol.OpGet, protocol.Request{}); err != nil {
		t.Fatal(err)
	}
	publishState(t, ghost, "ghost1", "plant", l.Fence().Fence())
	if err := <-done; err != nil {
		t.Fatalf("WaitHandover across a reconnection: %v", err)
	}
}

// publishState publishes device's retained state fenced at f (with a
// domain field when domain is set), as the agent owning it would.
func publishState(t *testing.T, sup *mqtttest.Supervisor, device, domain string, f fence.Fence) {
	t.Helper()
	st := struct {
		protocol.DeviceState
		Domain string `json:"domain,omitempty"`
	}{protocol.DeviceState{Device: device, Agent: "ghost", Online: true, Fence: &f, UpdatedAt: time.Now().UTC().Format(time.RFC3339)}, domain}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	topic := protocol.Topics{}.DeviceState(device)
	if err := mqtt.Wait(sup.Client().Publish(topic, 1, true, b), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Client().Publish(topic, 1, true, []byte{}) })
}

// awaitSubscribed polls the broker's subscription index (there is no
// event to wait for) until it lists client as a subscriber of topic.
func awaitSubscribed(t *testing.T, s *stack.Stack, topic, client string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, ok := s.Broker.Server().Topics.Subscribers(topic).Subscriptions[client]; ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never subscribed to %s", client, topic)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
