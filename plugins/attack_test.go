package plugins

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/logtest"
)

// attackConfig is the plugin config of this test binary run as an attack
// plugin (attackPluginMain): a config with an "attack" key is served by
// it instead of by testPluginMain, which refuses unknown keys.
type attackConfig struct {
	// Attack names the plugin's behaviour: "close-probe" serves a
	// closeProbe; "stderr-flood" first writes FloodBytes to stderr without
	// a newline, then a newline, then serves a closeProbe.
	Attack string `yaml:"attack"`
	// FloodBytes is the length of the stderr line of "stderr-flood".
	FloodBytes int `yaml:"flood_bytes"`
	// Log is the device: Apply appends "start <id>" and "done <id>";
	// Close appends "close" or, if an Apply is still running, "close
	// during apply <id>".
	Log string `yaml:"log"`
	// Hold is how long an Apply takes, ignoring its ctx.
	Hold time.Duration `yaml:"hold"`
}

// init runs this binary as the attack plugin when a host started it with
// an attackConfig; it runs before TestMain, so the test plugin and test
// hosts of main_test.go are untouched.
func init() {
	if !IsPlugin() {
		return
	}
	var ac attackConfig
	if yaml.Unmarshal([]byte(os.Getenv(EnvConfig)), &ac) != nil || ac.Attack == "" {
		return
	}
	attackPluginMain(ac)
	os.Exit(0)
}

// attackPluginMain serves a closeProbe through the SDK's Serve.
func attackPluginMain(ac attackConfig) {
	f, err := os.OpenFile(ac.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		Logger().Error("attack plugin: open log", "err", err)
		os.Exit(1)
	}
	if ac.Attack == "stderr-flood" {
		_, _ = os.Stderr.WriteString(strings.Repeat("x", ac.FloodBytes) + "\n")
	}
	Serve(&closeProbe{cfg: ac, log: f})
}

// closeProbe is a driver that records whether Close came while an Apply
// was still running (the Driver contract says it never does).
type closeProbe struct {
	cfg attackConfig
	mu  sync.Mutex // guards running and log writes
	run string     // id of the Apply in progress, "" if none
	log *os.File
}

func (p *closeProbe) Apply(_ context.Context, cmd devices.Command) (json.RawMessage, error) {
	p.note(func() string { p.run = cmd.ID; return "start " + cmd.ID })
	time.Sleep(p.cfg.Hold)
	p.note(func() string { p.run = ""; return "done " + cmd.ID })
	return json.RawMessage(`{"ok":true}`), nil
}

func (p *closeProbe) note(line func() string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = p.log.WriteString(line() + "\n")
	_ = p.log.Sync()
}

func (p *closeProbe) Describe() devices.Capabilities {
	return devices.Capabilities{Ops: map[string]devices.Op{"set": {}}}
}

func (p *closeProbe) Close() error {
	p.note(func() string {
		if p.run != "" {
			return "close during apply " + p.run
		}
		return "close"
	})
	return nil
}

// TestAttackInDoubtFailureWithLongMessageBecomesDeviceError breaks the
// driver rule (I4; devices.Driver: "a command that may have reached the
// device is reported CodeInDoubt, never as a failure"): a plugin driver,
// built on the SDK, answers in_doubt honestly but with a long message (a
// device dump, 100 KiB). The SDK caps outputs but not failure messages, so
// the answer exceeds the host's gRPC receive limit (output cap + 16 KiB);
// the host maps ResourceExhausted to device_error ("reached the device,
// answer over the cap"). device_error is a failure (status "failed"), so a
// command that may have acted is reported as one that did not. A
// stale_token answer likewise loses its code and the device's fence.
func TestAttackInDoubtFailureWithLongMessageBecomesDeviceError(t *testing.T) {
	long := strings.Repeat("d", 100<<10)
	fc := &fence.Fence{Epoch: 3, Seq: 50, Holder: "sup-b"}
	tests := []struct {
		name string
		fail error
		want devices.Code
	}{
		{name: "in_doubt", fail: devices.Errorf(devices.CodeInDoubt, "link dropped after the write: %s", long), want: devices.CodeInDoubt},
		{name: "stale_token", fail: &devices.Error{Code: devices.CodeStaleToken, Message: long, Fence: fc}, want: devices.CodeStaleToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := serve(t, &fake{fail: tc.fail})
			_, err := h.Apply(context.Background(), setCmd("c1"))
			if got := devices.CodeOf(err); got != tc.want {
				t.Fatalf("plugin answered %s with a %d-byte message; host reports %q (%.120v), want %q",
					tc.want, len(long), got, err, tc.want)
			}
		})
	}
}

// TestAttackOutputOverCapReportedAsFailure breaks the driver rule as
// devices.Driver states it (I4: "a failure code (device_error, ...)
// promises the command did not take effect"): a command whose output is
// one byte over devices.MaxOutputBytes certainly reached the device, yet
// both the SDK and the host answer device_error — which the agent
// publishes as status "failed" — instead of an answer that says it acted.
// (docs/plugins.md and TestPluginOutputIsUnbounded specify device_error:
// the two documents contradict each other.)
func TestAttackOutputOverCapReportedAsFailure(t *testing.T) {
	h, _ := serve(t, &fake{out: bigOutput(devices.MaxOutputBytes + 1)})
	_, err := h.Apply(context.Background(), setCmd("c1"))
	switch code := devices.CodeOf(err); {
	case err == nil:
	case code == devices.CodeDeviceError || code == devices.CodeDeviceTimeout || code == devices.CodeDeviceUnavailable:
		t.Fatalf("a command that acted (output over the cap) is answered with failure code %q: %v", code, err)
	}
}

// TestAttackHostCloseClosesDriverDuringApply breaks the devices.Driver
// contract that Serve promises to keep for plugin authors ("Close is
// called once, after the last Apply returned"): Host.Close (documented as
// safe "at any time") while a command is in the plugin stops it
// gracefully; go-plugin's Shutdown stops the gRPC server, plugin.Serve
// returns and serveDriver closes the driver while its Apply still runs.
// The host still answers in_doubt (that part holds).
func TestAttackHostCloseClosesDriverDuringApply(t *testing.T) {
	log := t.TempDir() + "/device.log"
	cfg := Config{Path: os.Args[0], Config: yamlNode(t, attackConfig{Attack: "close-probe", Log: log, Hold: 5 * time.Second}),
		PingInterval: 50 * time.Millisecond, RestartBackoff: time.Hour}
	h, err := Open("dev1", cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := h.PID()
	first := make(chan error, 1)
	go func() { first <- applyWithin(h, 30*time.Second, "c1") }()
	waitLogLine(t, log, "start c1")
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-first; devices.CodeOf(err) != devices.CodeInDoubt {
		t.Fatalf("command in the plugin at Close: %v, want in_doubt", err)
	}
	waitGone(t, pid)
	if got := deviceLog(t, log); contains(got, "close during apply c1") {
		t.Fatalf("the SDK closed the driver while its Apply was running; device log %q", got)
	}
}

// TestAttackStderrLineWithoutNewlineIsBufferedWhole breaks I6 ("oversized
// input never crashes the agent"): a plugin writing garbage to stderr
// without a newline makes the agent buffer it all. go-plugin hands the
// host's stderr writer a long line in 4 KiB pieces, but stderrLog appends
// every piece to one buffer until a newline comes and then logs it as one
// record: an 8 MiB line here is held and logged whole (a plugin that never
// writes a newline grows the agent's memory without bound).
func TestAttackStderrLineWithoutNewlineIsBufferedWhole(t *testing.T) {
	const flood, limit = 8 << 20, 1 << 20
	log := t.TempDir() + "/device.log"
	cfg := Config{Path: os.Args[0], Config: yamlNode(t, attackConfig{Attack: "stderr-flood", Log: log, FloodBytes: flood}),
		PingInterval: time.Second}
	rec := logtest.New()
	openChildLogged(t, cfg, rec.Logger())
	longest := waitStderrRecord(t, rec)
	if longest > limit {
		t.Fatalf("a plugin's stderr line was buffered and logged as one %d-byte record (limit %d)", longest, limit)
	}
}

// openChildLogged is openChild with log as the host's logger.
func openChildLogged(t *testing.T, cfg Config, log *slog.Logger) *Host {
	t.Helper()
	h, err := Open("dev1", cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// waitStderrRecord waits until rec holds a record forwarded from the
// plugin's stderr (not in hclog's form) and returns the longest message
// of those records.
func waitStderrRecord(t *testing.T, rec *logtest.Recorder) int {
	t.Helper()
	stderr := map[string]string{"stream": "stderr"}
	rec.WaitFor(t, stderr)
	longest := 0
	for _, r := range rec.Matching(stderr) {
		longest = max(longest, len(r["msg"]))
	}
	return longest
}
