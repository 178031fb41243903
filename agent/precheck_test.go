package agent

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

// TestDriversCheckedBeforeStore: an unknown driver or bad driver settings
// fail New with the key path, before the fence store is created.
func TestDriversCheckedBeforeStore(t *testing.T) {
	tests := []struct {
		name   string
		driver string
		doc    string
		want   string
	}{
		{"unknown driver", "simm", "latency: 1ms",
			`devices[0].driver: "simm" is not one of [mqttrelay sim test-argscheck test-argscheck-flip test-attack15 test-losing]`}, // the drivers this package's tests register
		{"unknown setting", "sim", "latncy: 1ms",
			"devices[0].settings.latncy: unknown key (known keys: fail_every, fence_file, latency, log, no_fence, ops, timeout_every, unavailable)"},
		{"bad setting value", "sim", "latency: soon",
			"devices[0].settings.latency: value \"soon\": line 1: cannot unmarshal !!str `soon` into time.Duration"},
	}
	for _, tt := range tests {
		h := newHarness(t, "pump1")
		h.cfg.Devices[0].Driver, h.cfg.Devices[0].Settings = tt.driver, simSettings(t, tt.doc)
		_, err := New(h.cfg.WithDefaults(), nil)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s:\n got %v\nwant %s", tt.name, err, tt.want)
		}
		if _, err := os.Stat(h.cfg.Agent.DataDir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: data_dir %s exists (%v): the store was opened before the drivers were checked", tt.name, h.cfg.Agent.DataDir, err)
		}
	}
}
