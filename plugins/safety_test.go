package plugins

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/plugins/internal/driverpb"
)

func setCmd(id string) devices.Command {
	return devices.Command{ID: id, Op: "set", Token: testToken()}
}

func applyWithin(h *Host, d time.Duration, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := h.Apply(ctx, setCmd(id))
	return err
}

// TestPluginQueuesCommandBehindOverrunningApply (issue 12, item 1): while
// an Apply that ignores its ctx is still running in the plugin, the host
// sends nothing more to that plugin: a concurrent command and a command
// right after the overrun command was answered get device_unavailable and
// never reach the device.
func TestPluginQueuesCommandBehindOverrunningApply(t *testing.T) {
	cfg, log := childConfig(t, testConfig{Hold: time.Minute})
	cfg.OverrunGrace = 3 * time.Second // c1 stays in the plugin while c2 is tried
	cfg.RestartBackoff = time.Hour     // stays down after the kill: nothing to race with
	h := openChild(t, cfg)
	first := make(chan error, 1)
	go func() { first <- applyWithin(h, 200*time.Millisecond, "c1") }()
	waitLogLine(t, log, "start c1")
	if err := applyWithin(h, 10*time.Second, "c2"); devices.CodeOf(err) != devices.CodeDeviceUnavailable || !errors.Is(err, ErrBusy) {
		t.Fatalf("command while c1 overruns: %v, want device_unavailable without sending", err)
	}
	if err := <-first; devices.CodeOf(err) != devices.CodeInDoubt {
		t.Fatalf("overrunning command: %v, want in_doubt", err)
	}
	if err := applyWithin(h, 10*time.Second, "c3"); devices.CodeOf(err) != devices.CodeDeviceUnavailable || !errors.Is(err, ErrNotRunning) {
		t.Fatalf("command after the overrun: %v, want device_unavailable without sending", err)
	}
	if got := deviceLog(t, log); !slices.Equal(got, []string{"start c1"}) {
		t.Fatalf("device log %q, want only c1's start", got)
	}
}

// TestPluginOverrunningApplyIsKilledAndInDoubt (issue 12, item 1): a
// plugin whose Apply overruns its deadline by more than the grace is
// killed before the host answers (so the command cannot act later), the
// answer is in_doubt, and the plugin is restarted.
func TestPluginOverrunningApplyIsKilledAndInDoubt(t *testing.T) {
	cfg, log := childConfig(t, testConfig{Hold: time.Minute})
	cfg.OverrunGrace = 200 * time.Millisecond
	h := openChild(t, cfg)
	avail := watchAvailability(h)
	pid := h.PID()
	err := applyWithin(h, 300*time.Millisecond, "c1")
	if devices.CodeOf(err) != devices.CodeInDoubt || !errors.Is(err, ErrOverrun) {
		t.Fatalf("overrunning command: %v, want in_doubt wrapping ErrOverrun", err)
	}
	if !processGone(pid) {
		t.Fatalf("plugin %d still runs after its overrun command was answered", pid)
	}
	if avail.next(t) || !avail.next(t) {
		t.Fatal("availability reports are not unavailable, then available")
	}
	if h.PID() == pid || h.PID() == 0 {
		t.Fatalf("pid after restart %d (was %d)", h.PID(), pid)
	}
	// c1 may not even have started on a loaded machine; it never finished.
	if got := deviceLog(t, log); len(got) > 1 || (len(got) == 1 && got[0] != "start c1") {
		t.Fatalf("device log %q, want at most c1's start", got)
	}
}

// TestServeRefusesApplyWhoseCtxIsDone (issue 12, item 1): the SDK side
// starts no Apply whose deadline has passed, and queues none behind a
// running one.
func TestServeRefusesApplyWhoseCtxIsDone(t *testing.T) {
	cfg, log := childConfig(t, testConfig{Hold: 5 * time.Second}) // c2 is sent while c1 holds
	h := openChild(t, cfg)
	rpc := h.current().drv.rpc
	req := func(id string, deadline time.Time) *driverpb.ApplyRequest {
		r := commandToPB(setCmd(id))
		r.DeadlineUnixNano = deadline.UnixNano()
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := rpc.Apply(ctx, req("late", time.Now().Add(-time.Second)))
	if err != nil || resp.GetFailure().GetCode() != string(devices.CodeDeviceTimeout) {
		t.Fatalf("apply past its deadline: %v, %v; want a device_timeout failure", resp, err)
	}
	running := make(chan error, 1)
	go func() {
		_, err := rpc.Apply(ctx, req("c1", time.Now().Add(20*time.Second)))
		running <- err
	}()
	waitLogLine(t, log, "start c1")
	resp, err = rpc.Apply(ctx, req("c2", time.Now().Add(20*time.Second)))
	if err != nil || resp.GetFailure().GetCode() != string(devices.CodeDeviceUnavailable) {
		t.Fatalf("apply behind a running one: %v, %v; want a device_unavailable failure", resp, err)
	}
	if err := <-running; err != nil {
		t.Fatal(err)
	}
	if got := deviceLog(t, log); !slices.Equal(got, []string{"start c1", "done c1"}) {
		t.Fatalf("device log %q, want only c1", got)
	}
}

// TestPluginOutputIsUnbounded (issue 12, item 7): an output over
// devices.MaxOutputBytes is dropped and the command is output_dropped (the
// agent answers applied: it did act) saying it reached the device; an answer
// too large to read is in_doubt; the plugin keeps running. The SDK drops it before
// sending; the host drops it for a plugin not built on the SDK, with
// gRPC's receive limit so a huge answer is not buffered.
func TestPluginOutputIsUnbounded(t *testing.T) {
	tests := []struct {
		name     string
		bytes    int
		uncapped bool
		code     devices.Code
	}{
		{name: "at the cap", bytes: devices.MaxOutputBytes},
		{name: "one byte over", bytes: devices.MaxOutputBytes + 1, code: devices.CodeOutputDropped},
		{name: "5 MiB", bytes: 5 << 20, code: devices.CodeOutputDropped},
		{name: "at the cap, host side", bytes: devices.MaxOutputBytes, uncapped: true},
		{name: "one byte over, host side", bytes: devices.MaxOutputBytes + 1, uncapped: true, code: devices.CodeOutputDropped},
		// Too large for gRPC to read: the host cannot tell what the plugin said.
		{name: "5 MiB, host side", bytes: 5 << 20, uncapped: true, code: devices.CodeInDoubt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := childConfig(t, testConfig{OutputBytes: tc.bytes, Uncapped: tc.uncapped})
			cfg.PingInterval = time.Second // a 5 MiB answer keeps the connection busy for a while
			h := openChild(t, cfg)
			pid := h.PID()
			for _, id := range []string{"c1", "c2"} {
				out, err := h.Apply(context.Background(), setCmd(id))
				if (tc.code == "") != (err == nil) || err != nil && devices.CodeOf(err) != tc.code {
					t.Fatalf("%s: err = %v, want code %q", id, err, tc.code)
				}
				if tc.code == "" && len(out) != tc.bytes {
					t.Fatalf("%s: output of %d bytes, want %d", id, len(out), tc.bytes)
				}
				if tc.code != "" && (out != nil || !strings.Contains(err.Error(), "reached the device")) {
					t.Fatalf("%s over the cap: %d bytes of output, err %v; want none, and a message that it reached the device",
						id, len(out), err)
				}
			}
			if h.PID() != pid {
				t.Fatalf("pid %d, was %d: want the same plugin still serving", h.PID(), pid)
			}
		})
	}
}

// TestPluginProcessesOutliveASIGKILLedAgent (issue 12, item 5): a host
// process killed with SIGKILL leaves no plugin behind — through Pdeathsig
// for a plugin it started, and through Serve's parent watch for a plugin
// started without Pdeathsig.
func TestPluginProcessesOutliveASIGKILLedAgent(t *testing.T) {
	tests := []struct {
		name string
		mode string
		tc   testConfig
	}{
		{name: "started by Open, the SDK watching its parent", mode: hostOpen},
		{name: "started by Open, Pdeathsig alone", mode: hostOpen, tc: testConfig{NoParentWatch: true}},
		{name: "started without Pdeathsig, the SDK watch alone", mode: hostExec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.tc.Log = t.TempDir() + "/device.log"
			host, pid := startHost(t, tc.mode, tc.tc)
			if err := host.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = host.Wait()
			waitGone(t, pid)
		})
	}
}

// startHost starts this binary as a test host process in mode and returns
// it with the pid of the plugin it started. Cleanup kills both if still
// running.
func startHost(t *testing.T, mode string, tc testConfig) (*exec.Cmd, int) {
	t.Helper()
	text, err := yaml.Marshal(tc)
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(t.TempDir() + "/host.stderr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stderr.Close() })
	host := exec.Command(os.Args[0])
	host.Env = append(os.Environ(), envTestHost+"="+mode, envTestPluginConfig+"="+string(text))
	host.Stderr = stderr
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	pid := readHostPID(t, out, stderr.Name())
	t.Cleanup(func() {
		if !processGone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return host, pid
}

// readHostPID reads the host's "pid <n>" line.
func readHostPID(t *testing.T, out interface{ Read([]byte) (int, error) }, stderrPath string) int {
	t.Helper()
	line := make(chan string, 1)
	go func() {
		var b [64]byte
		n, _ := out.Read(b[:])
		line <- string(b[:n])
	}()
	select {
	case l := <-line:
		pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(l, "pid ")))
		if err != nil || pid <= 0 {
			msg, _ := os.ReadFile(stderrPath)
			t.Fatalf("host said %q; its stderr:\n%s", l, msg)
		}
		return pid
	case <-time.After(60 * time.Second):
		t.Fatal("the test host never reported its plugin's pid")
		return 0
	}
}
