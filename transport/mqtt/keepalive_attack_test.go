package mqtt

import (
	"testing"
	"time"
)

// Found by an attack (agent mqtt keep_alive config, commit "agent: mqtt keep_alive,
// connect_timeout and max_reconnect_interval in the config"): the agent
// documents keep_alive as "a silent broker link is given up after about
// 1.5× this", and Validate accepts every non-negative duration. paho
// counts keep-alive in whole seconds (SetKeepAlive truncates) and the
// CONNECT packet carries it as 16 bits: keep_alive 500ms becomes 0 and
// 65536s wraps to 0 — MQTT's "no keep-alive": the client never pings and
// the broker never drops a silent agent, so the agent's Will (offline
// status) never fires and a blackholed link is never given up. Such a
// value must be refused by Validate or reach paho as 1..65535 seconds.
func TestAttackKeepAliveThatDisablesKeepAlive(t *testing.T) {
	for _, ka := range []time.Duration{500 * time.Millisecond, 65536 * time.Second} {
		t.Run(ka.String(), func(t *testing.T) {
			c := Config{Broker: "tcp://127.0.0.1:1883", ClientID: "a", KeepAlive: ka}
			if err := c.Validate("mqtt"); err != nil {
				return // refused: fine
			}
			o, err := c.ClientOptions(nil)
			if err != nil {
				t.Fatal(err)
			}
			if wire := uint16(o.KeepAlive); o.KeepAlive < 1 || wire == 0 || int64(wire) != o.KeepAlive {
				t.Fatalf("keep_alive %v is accepted and reaches MQTT as %d s (CONNECT field %d): keep-alive off", ka, o.KeepAlive, wire)
			}
		})
	}
}
