package sim

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/devices"
)

// settings parses doc into driver settings at "devices[0].settings".
func settings(t *testing.T, doc string) devices.Settings {
	t.Helper()
	var node yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &node); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	s := devices.Settings{Path: "devices[0].settings"}
	if len(node.Content) > 0 {
		s.Node = node.Content[0]
	}
	return s
}

func TestConfigErrorsNameKeyAndValue(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error
	}{
		{name: "unknown key", yaml: "latnecy: 5ms", want: []string{"devices[0].settings.latnecy", "unknown key"}},
		{name: "unknown op key", yaml: "ops: [{name: set, idem: true}]", want: []string{"devices[0].settings.ops[0].idem", "unknown key"}},
		{name: "bad duration", yaml: "latency: 5 parsecs", want: []string{"devices[0].settings.latency", "5 parsecs"}},
		{name: "wrong type", yaml: "fail_every: often", want: []string{"devices[0].settings.fail_every", "often"}},
		{name: "negative latency", yaml: "latency: -5ms", want: []string{`devices[0].settings.latency: value "-5ms"`, "≥ 0"}},
		{name: "negative fail_every", yaml: "fail_every: -1", want: []string{`devices[0].settings.fail_every: value "-1"`}},
		{name: "negative timeout_every", yaml: "timeout_every: -2", want: []string{`devices[0].settings.timeout_every: value "-2"`}},
		{name: "empty op name", yaml: "ops: [{name: set}, {idempotent: true}]", want: []string{`devices[0].settings.ops[1].name: value ""`}},
		{name: "bad op name", yaml: "ops: [{name: 'a b'}]", want: []string{`devices[0].settings.ops[0].name: value "a b"`}},
		{name: "duplicate op", yaml: "ops: [{name: set}, {name: set}]", want: []string{`devices[0].settings.ops[1].name: value "set"`, "twice"}},
		{name: "negative op latency", yaml: "ops: [{name: set, latency: -1s}]", want: []string{`devices[0].settings.ops[0].latency: value "-1s"`}},
		{name: "log is fence file", yaml: "log: x\nfence_file: x", want: []string{`devices[0].settings.fence_file: value "x"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := devices.Open("sim", "dev", settings(t, tc.yaml), nil)
			if err == nil {
				d.Close()
				t.Fatal("Open succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestValidateReturnsConfigError(t *testing.T) {
	err := Config{Ops: []OpConfig{{Name: "ok"}, {Name: "x", Latency: -time.Second}}}.Validate()
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Key != "ops[1].latency" || ce.Value != -time.Second {
		t.Fatalf("err = %#v, want *ConfigError at ops[1].latency", err)
	}
}

func TestOpenFromSettings(t *testing.T) {
	if !slices.Contains(devices.Names(), "sim") {
		t.Fatalf("devices.Names() = %v, want sim registered", devices.Names())
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "apply.log")
	doc := "ops:\n  - {name: on, idempotent: true, latency: 1ms}\n  - {name: off}\nlatency: 2ms\nlog: " + logPath +
		"\nfence_file: " + filepath.Join(dir, "fence.json")
	drv, err := devices.Open("sim", "dev", settings(t, doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	d := drv.(*Device)
	if d.ops["on"].latency != time.Millisecond || d.ops["off"].latency != 2*time.Millisecond || !d.Describe().Ops["on"].Idempotent {
		t.Fatalf("ops = %+v", d.ops)
	}
	if _, err := drv.Apply(context.Background(), cmd("1", "on", "", tok(1, 1, "a"))); err != nil {
		t.Fatal(err)
	}
	if entries, err := ReadLog(logPath); err != nil || len(entries) != 1 {
		t.Fatalf("ReadLog = %v, %v; want one entry", entries, err)
	}
}

func TestOpenWithoutSettingsUsesDefaults(t *testing.T) {
	drv, err := devices.Open("sim", "dev", devices.Settings{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	out, err := drv.Apply(context.Background(), cmd("1", "pulse", `{"ms":1}`, tok(1, 1, "a")))
	if err != nil || string(out) != `{"pulsed_ms":1}` {
		t.Fatalf("pulse = %s, %v", out, err)
	}
}

func TestNewRejectsBadDeviceID(t *testing.T) {
	if _, err := New("a/b", Config{}, nil); err == nil || !strings.Contains(err.Error(), `"a/b"`) {
		t.Fatalf("New(\"a/b\") err = %v, want one naming the id", err)
	}
}
