package plugins

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/devices"
)

// testConfig is the plugin config of this test binary run as a plugin
// (testPluginMain).
type testConfig struct {
	// Log is the device: every Apply appends "start <id>" as it begins and
	// "done <id>" once it has acted.
	Log string `yaml:"log"`
	// Hold is how long an Apply takes, ignoring its ctx (an overrunning
	// driver).
	Hold time.Duration `yaml:"hold"`
	// OutputBytes, if set, is the size of the JSON output of each Apply.
	OutputBytes int `yaml:"output_bytes"`
	// NoParentWatch serves without Serve's parent watch (a plugin not
	// built on the SDK's Serve).
	NoParentWatch bool `yaml:"no_parent_watch"`
	// Uncapped serves without the SDK's output cap (a plugin not built on
	// the SDK), so only the host's cap applies.
	Uncapped bool `yaml:"uncapped"`
}

// testDevice is the test plugin's driver.
type testDevice struct {
	cfg testConfig
	mu  sync.Mutex // serializes appends to log
	log *os.File
}

var _ devices.Driver = (*testDevice)(nil)

// testPluginMain serves a testDevice with the config the host passed.
func testPluginMain() {
	var cfg testConfig
	if err := DecodeConfig(&cfg); err != nil {
		Logger().Error("test plugin: bad config", "err", err)
		os.Exit(1)
	}
	f, err := os.OpenFile(cfg.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		Logger().Error("test plugin: open log", "err", err)
		os.Exit(1)
	}
	d := &testDevice{cfg: cfg, log: f}
	switch {
	case cfg.Uncapped:
		serveDriver(d, math.MaxInt)
	case cfg.NoParentWatch:
		serveDriver(d, devices.MaxOutputBytes)
	default:
		Serve(d)
	}
}

func (d *testDevice) Apply(ctx context.Context, cmd devices.Command) (json.RawMessage, error) {
	d.note("start " + cmd.ID)
	time.Sleep(d.cfg.Hold)
	d.note("done " + cmd.ID)
	if n := d.cfg.OutputBytes; n > 0 {
		return bigOutput(n), nil
	}
	return json.RawMessage(`{"ok":true}`), nil
}

func (d *testDevice) note(line string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, _ = d.log.WriteString(line + "\n")
}

func (d *testDevice) Describe() devices.Capabilities {
	return devices.Capabilities{Ops: map[string]devices.Op{"set": {}}}
}

func (d *testDevice) Close() error { return d.log.Close() }

// bigOutput is a JSON object of exactly n ≥ 11 bytes.
func bigOutput(n int) json.RawMessage {
	return json.RawMessage(`{"data":"` + strings.Repeat("x", n-11) + `"}`)
}

// childConfig is a Config running this test binary as the test plugin
// with tc; the device log is in a temporary directory.
func childConfig(t *testing.T, tc testConfig) (Config, string) {
	t.Helper()
	if tc.Log == "" {
		tc.Log = t.TempDir() + "/device.log"
	}
	return Config{Path: os.Args[0], Config: yamlNode(t, tc), PingInterval: 50 * time.Millisecond,
		RestartBackoff: 50 * time.Millisecond, RestartBackoffMax: time.Second}, tc.Log
}

// openChild starts a Host over cfg and closes it at cleanup.
func openChild(t *testing.T, cfg Config) *Host {
	t.Helper()
	h, err := Open("dev1", cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func yamlNode(t *testing.T, v any) yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		t.Fatal(err)
	}
	return n
}

// deviceLog returns the lines of the test device's log.
func deviceLog(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return strings.Split(s, "\n")
	}
	return nil
}

// waitLogLine waits until the device log has line.
func waitLogLine(t *testing.T, path, line string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !contains(deviceLog(t, path), line) {
		if time.Now().After(deadline) {
			t.Fatalf("device log never had %q: %q", line, deviceLog(t, path))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func contains(lines []string, line string) bool {
	for _, l := range lines {
		if l == line {
			return true
		}
	}
	return false
}

// processGone reports whether pid has exited: no such process, or a
// zombie (it holds nothing any more; its new parent may not reap it).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}

// waitGone waits, with a generous deadline, until pid has exited.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Test host processes (testHostMain): a test starts this binary with
// envTestHost set to a mode and envTestPluginConfig to the test plugin's
// config (YAML); the host starts the plugin, prints "pid <plugin pid>" and
// waits to be killed.
const (
	envTestHost         = "FENCEGATE_TEST_HOST"
	envTestPluginConfig = "FENCEGATE_TEST_PLUGIN_CONFIG"
	// hostOpen: the plugin is started by Open, as the agent does.
	hostOpen = "open"
	// hostExec: the plugin is started by plain exec, without Pdeathsig.
	hostExec = "exec"
)

func testHostMain(mode string) int {
	pid, err := startForHost(mode, os.Getenv(envTestPluginConfig))
	if err != nil {
		fmt.Fprintln(os.Stderr, "test host:", err)
		return 2
	}
	fmt.Printf("pid %d\n", pid)
	time.Sleep(10 * time.Minute) // the test kills this process long before
	return 3
}

// startForHost starts the test plugin with config text as mode says and
// returns its pid. The plugin is left running.
func startForHost(mode, text string) (int, error) {
	if mode == hostExec {
		return execPlugin(text)
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(text), &n); err != nil {
		return 0, err
	}
	h, err := Open("dev1", Config{Path: os.Args[0], Config: *n.Content[0]}, nil)
	if err != nil {
		return 0, err
	}
	return h.PID(), nil
}

// execPlugin runs the test plugin as a plain child with the handshake in
// its environment, and returns once it serves.
func execPlugin(text string) (int, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), Handshake.MagicCookieKey+"="+Handshake.MagicCookieValue,
		fmt.Sprintf("PLUGIN_PROTOCOL_VERSIONS=%d", ProtocolVersion), EnvConfig+"="+text)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		return 0, fmt.Errorf("plugin handshake line: %w", err)
	}
	return cmd.Process.Pid, nil
}
