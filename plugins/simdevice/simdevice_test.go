package simdevice

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/internal/logtest"
	"github.com/fencegate/fencegate/plugins"
)

// TestInProcess serves the simulated device in go-plugin's test mode: the
// device's own fence answers across the gRPC boundary.
func TestInProcess(t *testing.T) {
	d, err := sim.New("pump1", sim.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithCancel(context.Background())
	rc, closed, err := plugins.ServeTest(ctx, Logged(d, slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-closed }()
	h, err := plugins.Attach("pump1", rc, plugins.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if caps := h.Describe(); !caps.ChecksTokens || !caps.Ops["get"].Idempotent || len(caps.Ops) != 3 {
		t.Fatalf("Describe = %+v", caps)
	}
	if _, err := h.Apply(ctx, command("c1", "set", `{"value":5}`, 7)); err != nil {
		t.Fatal(err)
	}
	out, err := h.Apply(ctx, command("c2", "get", "", 7))
	if err != nil || string(out) != `{"value":5}` {
		t.Fatalf("get = %s, %v", out, err)
	}
	_, err = h.Apply(ctx, command("c3", "set", `{"value":6}`, 6))
	var de *devices.Error
	if !errors.As(err, &de) || de.Code != devices.CodeStaleToken || de.Fence == nil || de.Fence.Seq != 7 {
		t.Fatalf("stale apply: %v (fence %+v), want stale_token at seq 7", err, de)
	}
}

// TestChildKilledMidCommand runs the plugin as a real child process, kills
// it with SIGKILL while a command is in it, and checks: in_doubt, the device
// reported unavailable then available, the restarted plugin applies the
// next command and still holds its own fence, and the apply log is sound.
func TestChildKilledMidCommand(t *testing.T) {
	dir := t.TempDir()
	rec := logtest.New()
	h, err := plugins.Open("pump1", child(t, dir, ""), slog.New(rec).With("device", "pump1"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	avail := watch(h)
	ctx := context.Background()
	if _, err := h.Apply(ctx, command("c1", "set", `{"value":1}`, 5)); err != nil {
		t.Fatal(err)
	}
	first := readPID(t, dir)
	if h.PID() != first {
		t.Fatalf("PID() = %d, pid file says %d", h.PID(), first)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := h.Apply(ctx, command("c2", "pulse", `{"ms":60000}`, 5))
		errc <- err
	}()
	// The plugin logs on stderr as the apply starts; the host forwards it.
	rec.WaitFor(t, map[string]string{"msg": "apply started", "id": "c2", "device": "pump1", "plugin": filepath.Base(os.Args[0])})
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = <-errc
	if devices.CodeOf(err) != devices.CodeInDoubt || !errors.Is(err, plugins.ErrPluginLost) {
		t.Fatalf("in-flight command: %v, want in_doubt wrapping ErrPluginLost", err)
	}
	avail.want(t, false, rec)
	avail.want(t, true, rec)
	if _, err := h.Apply(ctx, command("c3", "set", `{"value":3}`, 6)); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if pid := readPID(t, dir); pid == first {
		t.Fatalf("plugin pid %d unchanged after SIGKILL", pid)
	}
	if _, err := h.Apply(ctx, command("c4", "set", `{"value":4}`, 5)); devices.CodeOf(err) != devices.CodeStaleToken {
		t.Fatalf("older token after restart: %v, want stale_token from the device's own fence", err)
	}
	checkLog(t, filepath.Join(dir, "apply.log"), "c1", "c3")
}

func checkLog(t *testing.T, path string, wantIDs ...string) {
	t.Helper()
	entries, err := sim.ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.CheckLog(entries); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.ID)
	}
	if len(ids) != len(wantIDs) {
		t.Fatalf("applied %v, want %v", ids, wantIDs)
	}
	for i := range ids {
		if ids[i] != wantIDs[i] {
			t.Fatalf("applied %v, want %v", ids, wantIDs)
		}
	}
}

func TestChecksum(t *testing.T) {
	sum := fileSHA256(t, os.Args[0])
	tests := []struct {
		name    string
		sha     string
		wantErr error
	}{
		{name: "matching", sha: sum},
		{name: "mismatch", sha: "00" + sum[2:], wantErr: plugins.ErrChecksum},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := child(t, t.TempDir(), "")
			cfg.SHA256 = tc.sha
			h, err := plugins.Open("pump1", cfg, nil)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Open: %v, want %v", err, tc.wantErr)
			}
			if h != nil {
				h.Close()
			}
		})
	}
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestBadConfigFailsStart: the plugin refuses its config, names the key on
// stderr, and the host's Open fails with that line in the device's log.
func TestBadConfigFailsStart(t *testing.T) {
	rec := logtest.New()
	cfg := child(t, t.TempDir(), "colour: red\n")
	cfg.StartTimeout = 20 * time.Second
	_, err := plugins.Open("pump1", cfg, slog.New(rec).With("device", "pump1"))
	if err == nil {
		t.Fatal("Open succeeded with a bad plugin config")
	}
	m := rec.WaitFor(t, map[string]string{"msg": "simdevice: cannot start", "device": "pump1"})
	if want := "colour: unknown key"; !contains(m["err"], want) {
		t.Fatalf("logged err %q, want it to contain %q", m["err"], want)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
