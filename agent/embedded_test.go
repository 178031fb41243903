package agent

import (
	"strings"
	"testing"
)

// TestExposedAnonymousBrokerRefused: an embedded broker on a non-loopback
// address without credentials is a config error naming
// mqtt.allow_anonymous; with it, or with credentials, the config is valid.
func TestExposedAnonymousBrokerRefused(t *testing.T) {
	dev := "devices: [{id: p, driver: sim}]\n"
	tests := []struct {
		name, mqtt, want string
	}{
		{"all interfaces, anonymous", "mqtt: {listen: '0.0.0.0:1883'}", "mqtt.allow_anonymous: true"},
		{"no host, anonymous", "mqtt: {listen: ':1883'}", `mqtt.listen: ":1883"`},
		{"allowed", "mqtt: {listen: '0.0.0.0:1883', allow_anonymous: true}", ""},
		{"password file", "mqtt: {listen: '0.0.0.0:1883', password_file: p}", ""},
		{"client certificates", "mqtt: {listen: '0.0.0.0:1883', server_tls: {cert: c, key: k, client_ca: ca}}", ""},
		{"tls without client CA", "mqtt: {listen: '0.0.0.0:1883', server_tls: {cert: c, key: k}}", "mqtt.allow_anonymous"},
		{"client CA without cert", "mqtt: {server_tls: {client_ca: ca}}", "mqtt.server_tls.client_ca"},
		{"loopback", "mqtt: {listen: '127.0.0.1:1883'}", ""},
		{"external broker", "mqtt: {broker: 'tcp://10.0.0.1:1883', listen: '0.0.0.0:1883'}", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(writeConfig(t, validBase+dev+tc.mqtt))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
