package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/persist"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const validBase = "agent: {id: gw1}\ntrust: {keys: [k.pub]}\n"

func TestConfigErrorsNameKeyAndValue(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"unknown key", validBase + "devices: [{id: p, driver: sim, drivr: x}]", "devices[0].drivr: unknown key"},
		{"unknown section", validBase + "devices: [{id: p, driver: sim}]\nmqt: {}", "mqt: unknown key"},
		{"wrong type", validBase + "devices: [{id: p, driver: sim}]\nlimits: {queue: lots}", `limits.queue: value "lots"`},
		{"bad duration", validBase + "devices: [{id: p, driver: sim, timeout: soon}]", `devices[0].timeout: value "soon"`},
		{"bad device id", validBase + "devices: [{id: 'pump 1', driver: sim}]", `devices[0].id: "pump 1"`},
		{"duplicate device", validBase + "devices: [{id: p, driver: sim}, {id: p, driver: sim}]", `devices[1].id: "p" is already devices[0]`},
		{"missing driver", validBase + "devices: [{id: p}]", "devices[0].driver: missing"},
		{"no devices", validBase, "devices: at least one"},
		{"no keys", "agent: {id: gw1}\ndevices: [{id: p, driver: sim}]", "trust.keys"},
		{"bad broker", validBase + "devices: [{id: p, driver: sim}]\nmqtt: {broker: 'http://x'}", `mqtt.broker`},
		{"keep alive", validBase + "devices: [{id: p, driver: sim}]\nmqtt: {keep_alive: -1s}", "mqtt.keep_alive"},
		{"payload limit", validBase + "devices: [{id: p, driver: sim}]\nlimits: {max_payload: -1}", "limits.max_payload: -1"},
		{"journal records", validBase + "devices: [{id: p, driver: sim}]\njournal: {max_records: -5}", "journal.max_records: -5 is below limits.queue + 2 (1026)"},
		{"journal below queue", validBase + "devices: [{id: p, driver: sim}]\nlimits: {queue: 100}\njournal: {max_records: 101}", "journal.max_records: 101 is below limits.queue + 2 (102)"},
		{"journal age", validBase + "devices: [{id: p, driver: sim}]\njournal: {max_age: -1h}", "journal.max_age: -1h0m0s is under 1m0s"},
		{"journal age short", validBase + "devices: [{id: p, driver: sim}]\njournal: {max_age: 30s}", "journal.max_age: 30s is under 1m0s"},
		{"journal age type", validBase + "devices: [{id: p, driver: sim}]\njournal: {max_age: forever}", `journal.max_age: value "forever"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(writeConfig(t, tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestDriverSettingsErrorsNameKey(t *testing.T) {
	dir := t.TempDir()
	pub := filepath.Join(dir, "k.pub")
	if err := writePub(pub); err != nil {
		t.Fatal(err)
	}
	body := "agent: {id: gw1, data_dir: " + filepath.Join(dir, "data") + "}\ntrust: {keys: [" + pub + "]}\n" +
		"http: {listen: 'off'}\nmqtt: {listen: '127.0.0.1:0'}\ndevices: [{id: p, driver: sim, settings: {latencyy: 1s}}]"
	cfg, err := LoadConfig(writeConfig(t, body))
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "devices[0].settings.latencyy") {
		t.Fatalf("err = %v, want the settings key path", err)
	}
	// Settings are checked before the store is opened: it was never created.
	if _, err := os.Stat(filepath.Join(dir, "data", "fence.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("fence.db after a start refused for its driver settings: %v, want it absent", err)
	}
	// A driver that fails to open (after the store was opened): the failed
	// start closed the store again, it opens without waiting for a lock.
	body = strings.Replace(body, "{latencyy: 1s}", "{fence_file: "+dir+"}", 1)
	if cfg, err = LoadConfig(writeConfig(t, body)); err != nil {
		t.Fatal(err)
	}
	if _, err = New(cfg, nil); err == nil || !strings.Contains(err.Error(), "devices[0] (p)") {
		t.Fatalf("err = %v, want the device's open error", err)
	}
	s, err := persist.Open(filepath.Join(dir, "data", "fence.db"), persist.Options{LockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("store left open by a failed start: %v", err)
	}
	s.Close()
}

func TestExampleConfigLoads(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("..", "examples", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Devices) != 1 || cfg.Devices[0].Domain != "plant" || cfg.Limits.Queue != 1024 {
		t.Fatalf("example config: %+v", cfg)
	}
}

func writePub(path string) error {
	return fenceWritePub(path)
}

// The broker link's timing reaches the MQTT client.
func TestConfigMQTTTimingReachesClient(t *testing.T) {
	cfg, err := LoadConfig(writeConfig(t, validBase+"devices: [{id: p, driver: sim}]\nmqtt: {keep_alive: 2s, connect_timeout: 3s, max_reconnect_interval: 1s}"))
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.MQTT.client()
	if c.KeepAlive != 2*time.Second || c.ConnectTimeout != 3*time.Second || c.MaxReconnectInterval != time.Second {
		t.Fatalf("client config = %+v, want keep_alive 2s, connect_timeout 3s, max_reconnect_interval 1s", c)
	}
}
