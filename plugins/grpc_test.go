package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
)

func testToken() fence.Token {
	t := fence.Token{Domain: "plant", Epoch: 3, Seq: 42, Holder: "sup-a", IssuedAt: 1700000000123, TTLms: 5000, Raw: "fg1.abc.def"}
	for i := range t.KeyID {
		t.KeyID[i] = byte(i + 1)
	}
	return t
}

func TestApplyRoundTripInProcess(t *testing.T) {
	f := &fake{out: json.RawMessage(`{"value":7}`)}
	h, _ := serve(t, f)
	caps := h.Describe()
	if !caps.ChecksTokens || !caps.Supports("set") || !caps.Ops["get"].Idempotent || caps.Ops["set"].Idempotent {
		t.Fatalf("Describe = %+v", caps)
	}
	cmd := devices.Command{ID: "c1", Op: "set", Args: json.RawMessage(`{"value":7}`), Token: testToken()}
	out, err := h.Apply(context.Background(), cmd)
	if err != nil || string(out) != `{"value":7}` {
		t.Fatalf("Apply = %s, %v", out, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.got) != 1 || !reflect.DeepEqual(f.got[0], cmd) {
		t.Fatalf("plugin got %+v, want %+v", f.got, cmd)
	}
}

func TestFailuresCrossTheWire(t *testing.T) {
	f := &fake{}
	h, _ := serve(t, f)
	fc := &fence.Fence{Epoch: 3, Seq: 50, Holder: "sup-b"}
	tests := []struct {
		name      string
		fail      error
		wantCode  devices.Code
		wantFence *fence.Fence
	}{
		{name: "stale token keeps the device fence", fail: &devices.Error{Code: devices.CodeStaleToken, Message: "old", Fence: fc},
			wantCode: devices.CodeStaleToken, wantFence: fc},
		{name: "unknown op", fail: devices.Errorf(devices.CodeUnknownOp, "no"), wantCode: devices.CodeUnknownOp},
		{name: "device unavailable", fail: devices.Errorf(devices.CodeDeviceUnavailable, "unplugged"), wantCode: devices.CodeDeviceUnavailable},
		{name: "plain error is device_error", fail: errors.New("boom"), wantCode: devices.CodeDeviceError},
		{name: "unknown code is device_error", fail: devices.Errorf("melted", "x"), wantCode: devices.CodeDeviceError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.set(func(f *fake) { f.fail = tc.fail })
			_, err := h.Apply(context.Background(), devices.Command{ID: "c", Op: "set", Token: testToken()})
			var de *devices.Error
			if !errors.As(err, &de) || de.Code != tc.wantCode {
				t.Fatalf("err = %v, want code %s", err, tc.wantCode)
			}
			if !reflect.DeepEqual(de.Fence, tc.wantFence) {
				t.Fatalf("fence = %+v, want %+v", de.Fence, tc.wantFence)
			}
		})
	}
}

func TestDeadlineReachesPlugin(t *testing.T) {
	f := &fake{}
	h, _ := serve(t, f)
	want := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), want)
	defer cancel()
	if _, err := h.Apply(ctx, devices.Command{ID: "c", Op: "set", Token: testToken()}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	got := f.deadline
	f.mu.Unlock()
	if d := got.Sub(want); got.IsZero() || d > time.Minute || d < -time.Minute {
		t.Fatalf("plugin saw deadline %v, want about %v", got, want)
	}
}

// TestDeadlineReachesPluginAndItsAnswerArrives: a driver that honours its
// ctx answers device_timeout at the deadline, the host waits for that
// answer (within the grace) instead of guessing, and the plugin serves the
// next command.
func TestDeadlineReachesPluginAndItsAnswerArrives(t *testing.T) {
	f := &fake{block: true}
	h, _ := serve(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := h.Apply(ctx, devices.Command{ID: "c", Op: "set", Token: testToken()})
	if devices.CodeOf(err) != devices.CodeDeviceTimeout || !strings.Contains(err.Error(), "blocked until the deadline") {
		t.Fatalf("err = %v, want the plugin's own device_timeout", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		ctxErr := f.ctxErr
		f.mu.Unlock()
		if ctxErr != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the plugin's ctx was never cancelled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.set(func(f *fake) { f.block = false })
	if _, err := h.Apply(context.Background(), devices.Command{ID: "c2", Op: "set", Token: testToken()}); err != nil {
		t.Fatalf("apply after a timed-out one: %v", err)
	}
}

func TestPluginReportsAvailability(t *testing.T) {
	f := &fake{}
	h, _ := serve(t, f)
	a := watchAvailability(h)
	f.mu.Lock()
	report := f.handler
	f.mu.Unlock()
	report(false, "unplugged")
	if a.next(t) {
		t.Fatal("first report is available, want unavailable")
	}
	report(true, "")
	if !a.next(t) {
		t.Fatal("second report is unavailable, want available")
	}
}

func TestLostAttachedPluginIsUnavailable(t *testing.T) {
	h, stopServer := serve(t, &fake{})
	a := watchAvailability(h)
	stopServer()
	if a.next(t) {
		t.Fatal("report after the plugin stopped is available")
	}
	_, err := h.Apply(context.Background(), devices.Command{ID: "c", Op: "set", Token: testToken()})
	if devices.CodeOf(err) != devices.CodeDeviceUnavailable || !errors.Is(err, ErrNotRunning) {
		t.Fatalf("err = %v, want device_unavailable wrapping ErrNotRunning", err)
	}
}
