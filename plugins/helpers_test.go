package plugins

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
)

// fake is a driver whose behaviour each test sets; it records what it got.
type fake struct {
	mu       sync.Mutex // guards the fields below
	got      []devices.Command
	deadline time.Time // of the last Apply's ctx; zero if none
	ctxErr   error     // of the last Apply's ctx when it returned
	fail     error
	out      json.RawMessage
	block    bool // wait for ctx
	handler  func(bool, string)
}

var (
	_ devices.Driver               = (*fake)(nil)
	_ devices.AvailabilityReporter = (*fake)(nil)
)

func (f *fake) Apply(ctx context.Context, cmd devices.Command) (json.RawMessage, error) {
	f.mu.Lock()
	f.got = append(f.got, cmd)
	f.deadline, _ = ctx.Deadline()
	block, fail, out := f.block, f.fail, f.out
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		f.mu.Lock()
		f.ctxErr = ctx.Err()
		f.mu.Unlock()
		return nil, devices.Errorf(devices.CodeDeviceTimeout, "blocked until the deadline")
	}
	return out, fail
}

func (f *fake) Describe() devices.Capabilities {
	return devices.Capabilities{Ops: map[string]devices.Op{"set": {}, "get": {Idempotent: true}}, ChecksTokens: true}
}

func (f *fake) Close() error { return nil }

func (f *fake) OnAvailability(h func(bool, string)) {
	f.mu.Lock()
	f.handler = h
	f.mu.Unlock()
}

func (f *fake) set(fn func(f *fake)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// serve runs f in-process and attaches a Host to it; both stop at cleanup.
// It returns the host and a function that stops the server (a "crash").
func serve(t *testing.T, f *fake) (*Host, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rc, closed, err := ServeTest(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Attach("dev1", rc, Config{PingInterval: 20 * time.Millisecond}, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
		cancel()
		<-closed
	})
	return h, cancel
}

// availLog records availability reports.
type availLog struct {
	mu  sync.Mutex
	got []bool
	ch  chan bool
}

func watchAvailability(h *Host) *availLog {
	a := &availLog{ch: make(chan bool, 64)}
	h.OnAvailability(func(ok bool, _ string) {
		a.mu.Lock()
		a.got = append(a.got, ok)
		a.mu.Unlock()
		a.ch <- ok
	})
	return a
}

// next waits for the next report.
func (a *availLog) next(t *testing.T) bool {
	t.Helper()
	select {
	case ok := <-a.ch:
		return ok
	case <-time.After(20 * time.Second):
		t.Fatal("no availability report")
		return false
	}
}
