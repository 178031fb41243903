package supervisor_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/internal/mqtttest"
	"github.com/fencegate/fencegate/internal/stack"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
)

// TestSendAfterLossOrReleaseRefused: once a lease is released, or lost
// because no renewal was confirmed, Send refuses with ErrLeaseLost and the
// device never sees the command — although no newer lease exists that the
// agent's fence could reject it with.
func TestSendAfterLossOrReleaseRefused(t *testing.T) {
	tests := []struct {
		name string
		end  func(t *testing.T, l *supervisor.Lease, p *proxy)
	}{
		{name: "released", end: func(t *testing.T, l *supervisor.Lease, _ *proxy) {
			if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "lost", end: func(t *testing.T, l *supervisor.Lease, p *proxy) {
			p.pause()
			awaitDone(t, l)
			p.resume()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := startStack(t, 0)
			p := startProxy(t, s.Broker.Addr())
			a := dial(t, "tcp://"+p.addr(), "A")
			l, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			tc.end(t, l, p)
			_, err = l.Send(ctxT(t, 10*time.Second), "pump1", "set", map[string]int{"value": 1})
			if !errors.Is(err, supervisor.ErrLeaseLost) {
				t.Fatalf("Send after the lease ended: %v, want ErrLeaseLost", err)
			}
			if got := applied(t, s, "pump1"); len(got) != 0 {
				t.Fatalf("device applied %+v after the lease ended", got)
			}
		})
	}
}

// TestSendStopsResendingWhenLost: a Send in flight when its lease is lost
// returns ErrLeaseLost (and ErrNoResult: it may have been applied) at the
// loss instead of resending until ctx ends; the copies held in the
// partition reach the agent late, past their deadline_ms, and are answered
// expired, not applied.
func TestSendStopsResendingWhenLost(t *testing.T) {
	s := startStack(t, 0)
	p := startProxy(t, s.Broker.Addr())
	w := mqtttest.NewSupervisor(t, s.URL(), mqtttest.Options{ClientID: "reply-watch"})
	replies := w.Watch(t, protocol.Topics{}.ReplyTopic("sup-A")+"/#")
	a := dial(t, "tcp://"+p.addr(), "A")
	l, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p.pause()
	_, err = l.Send(ctxT(t, 60*time.Second), "pump1", "set", map[string]int{"value": 1})
	if !errors.Is(err, supervisor.ErrLeaseLost) || !errors.Is(err, supervisor.ErrNoResult) {
		t.Fatalf("Send across the loss: %v, want ErrLeaseLost and ErrNoResult", err)
	}
	p.resume()
	if r := nextResult(t, replies, "pump1"); r.Code != protocol.CodeExpired {
		t.Fatalf("late copy answered %+v, want expired", r)
	}
	if got := applied(t, s, "pump1"); len(got) != 0 {
		t.Fatalf("device applied %+v after the lease was lost", got)
	}
}

// TestSendCarriesDeadline: every command carries deadline_ms, the earlier
// of ctx's deadline and the lease's validity.
func TestSendCarriesDeadline(t *testing.T) {
	s := startStack(t, 0)
	w := mqtttest.NewSupervisor(t, s.URL(), mqtttest.Options{ClientID: "cmd-watch"})
	commands := w.Watch(t, protocol.Topics{}.DeviceCommands("pump1"))
	a := dial(t, s.URL(), "A")
	l, err := a.Acquire(ctxT(t, 10*time.Second), "plant", supervisor.AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	before := l.ValidUntil()
	if _, err := l.Send(ctxT(t, 60*time.Second), "pump1", "set", map[string]int{"value": 1}); err != nil {
		t.Fatal(err)
	}
	if d := nextCommand(t, commands).DeadlineMs; d < before.UnixMilli() || d > l.ValidUntil().UnixMilli() {
		t.Fatalf("deadline_ms %d with a long ctx, want ValidUntil (%d..%d)", d, before.UnixMilli(), l.ValidUntil().UnixMilli())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ctxDeadline, _ := ctx.Deadline()
	if _, err := l.Send(ctx, "pump1", "set", map[string]int{"value": 2}); err != nil {
		t.Fatal(err)
	}
	if d := nextCommand(t, commands).DeadlineMs; d != ctxDeadline.UnixMilli() {
		t.Fatalf("deadline_ms %d with a short ctx, want ctx's deadline %d", d, ctxDeadline.UnixMilli())
	}
}

func awaitDone(t *testing.T, l *supervisor.Lease) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("lease not lost")
	}
}

// applied is the device's apply log; none if the device never applied.
func applied(t *testing.T, s *stack.Stack, device string) []sim.Entry {
	t.Helper()
	entries, err := sim.ReadLog(s.DeviceLog(device))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return entries
}

func nextCommand(t *testing.T, ch <-chan []byte) protocol.Command {
	t.Helper()
	var c protocol.Command
	decodeNext(t, ch, &c)
	return c
}

// nextResult skips lease responses (they share the reply topic) up to
// the next result of device.
func nextResult(t *testing.T, ch <-chan []byte, device string) protocol.Result {
	t.Helper()
	for {
		var r protocol.Result
		decodeNext(t, ch, &r)
		if r.Device == device {
			return r
		}
	}
}

func decodeNext(t *testing.T, ch <-chan []byte, v any) {
	t.Helper()
	select {
	case p := <-ch:
		if err := json.Unmarshal(p, v); err != nil {
			t.Fatalf("payload %q: %v", p, err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no message")
	}
}
