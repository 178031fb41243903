package server_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/lease/server"
)

// TestLoadConfigErrorsNameTheKey: a bad key or value in the controller's
// YAML is an error naming its key path and value, exactly, with no
// repeated "yaml:" prefix; a good file loads.
func TestLoadConfigErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "controller.yaml")
	tests := []struct{ name, doc, want string }{
		{"unknown top-level key", "data_dri: /var/lib/x\n",
			"unknown top-level key"},
		{"unknown key in mqtt", "mqtt:\n  brokr: tcp://b:1883\n",
			"mqtt.brokr: unknown key (known keys: broker, client_id, connect_timeout, keep_alive, max_reconnect_interval, password, reply_prefixes, tls, username)"},
		{"inlined field, wrong type", "mqtt:\n  keep_alive: soon\n",
			"mqtt.keep_alive: value \"soon\": line 2: cannot unmarshal !!str `soon` into time.Duration"},
		{"etcd field, wrong type", "etcd:\n  endpoints: http://e:2379\n",
			"etcd.endpoints: want a list, got \"http://e:2379\""},
		{"wrong type", "max_domains: lots\n",
			"max_domains: value \"lots\": line 1: cannot unmarshal !!str `lots` into int"},
		{"syntax", "store: [bbolt\n",
			"yaml: line 1: did not find expected ',' or ']'"},
	}
	for _, tt := range tests {
		if err := os.WriteFile(path, []byte(tt.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := server.LoadConfig(path)
		want := "config " + path + ": " + tt.want
		if tt.name == "unknown top-level key" {
			want = "config " + path + ": data_dri: unknown key (known keys: authz, data_dir, domains, embedded_broker, embedded_broker_allow_anonymous, embedded_broker_password_file, embedded_broker_tls, epoch, etcd, generate_key, http, http_auth, key, log_level, max_domains, mqtt, mqtt_share_group, store, topic_prefix, trust_keys)"
		}
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", tt.name, err, want)
		}
	}
	if err := os.WriteFile(path, []byte("data_dir: /var/lib/c\nmqtt: {broker: tcp://b:1883, keep_alive: 5s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := server.LoadConfig(path)
	if err != nil || cfg.DataDir != "/var/lib/c" || cfg.MQTT.Broker != "tcp://b:1883" || cfg.MQTT.KeepAlive.Seconds() != 5 {
		t.Fatalf("good file: %+v, %v", cfg, err)
	}
}
