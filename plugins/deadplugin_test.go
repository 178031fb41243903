package plugins

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
)

// A plugin killed from outside between two commands (found by the fault
// harness): the next command, sent before the host's ping noticed, must
// not be answered in_doubt — it provably never reached the plugin. The host
// answers device_unavailable (not applied), takes the plugin out of
// service and restarts it, and the device log never sees the command.
func TestCommandToDeadPluginIsNotInDoubt(t *testing.T) {
	cfg, log := childConfig(t, testConfig{})
	cfg.PingInterval = time.Hour // the ping must not be what notices
	h := openChild(t, cfg)
	pid := h.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	deadline := time.Now().Add(30 * time.Second)
	for !h.current().client.Exited() { // go-plugin reaps it in its own goroutine
		if time.Now().After(deadline) {
			t.Fatal("go-plugin never saw its plugin exit")
		}
		time.Sleep(5 * time.Millisecond)
	}
	err := applyWithin(h, 5*time.Second, "c1")
	if code := devices.CodeOf(err); code != devices.CodeDeviceUnavailable || !errors.Is(err, ErrPluginLost) {
		t.Fatalf("command to a dead plugin: %v (code %s), want device_unavailable wrapping ErrPluginLost", err, code)
	}
	if got := deviceLog(t, log); len(got) != 0 {
		t.Fatalf("device log %q, want nothing: c1 was never sent", got)
	}
	for h.PID() == 0 || h.PID() == pid { // restarted
		if time.Now().After(deadline) {
			t.Fatal("the dead plugin was not restarted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := applyWithin(h, 10*time.Second, "c2"); err != nil {
		t.Fatalf("command to the restarted plugin: %v", err)
	}
}
