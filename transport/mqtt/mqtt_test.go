package mqtt

import (
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfigValidateNamesKey(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"bad scheme", Config{Broker: "http://x:1"}, `mqtt.broker: scheme "http"`},
		{"no host", Config{Broker: "tcp://"}, `mqtt.broker: "tcp://"`},
		{"cert without key", Config{TLS: TLS{Cert: "c.pem"}}, "mqtt.tls"},
		{"negative keepalive", Config{KeepAlive: -time.Second}, "mqtt.keep_alive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate("mqtt")
			if err == nil || !contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if err := (Config{Broker: "tcp://127.0.0.1:1883"}).Validate("mqtt"); err != nil {
		t.Fatal(err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestEmbeddedBrokerRoundTrip connects a real paho client to the embedded
// broker, subscribes from the on-connect handler and gets its own message.
func TestEmbeddedBrokerRoundTrip(t *testing.T) {
	b, err := StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := make(chan string, 1)
	topic := "fencegate/v1/devices/d1/commands"
	opts, err := Config{Broker: b.URL(), ClientID: "t"}.ClientOptions(func(c paho.Client) {
		c.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) { got <- string(m.Payload()) })
	})
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(opts)
	if err := Wait(c.Connect(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(100)
	for range 50 {
		if err := Wait(c.Publish(topic, 1, false, "hello"), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-got:
			if m != "hello" {
				t.Fatalf("got %q", m)
			}
			return
		case <-time.After(100 * time.Millisecond): // the subscription may not be in place yet
		}
	}
	t.Fatal("no message came back in 50 tries")
}

// TestEmbeddedRefusesOversizePackets: a publish larger than the broker's
// packet limit never reaches a subscriber (the broker drops the sender).
func TestEmbeddedRefusesOversizePackets(t *testing.T) {
	b, err := StartEmbeddedLimit("127.0.0.1:0", nil, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := make(chan int, 4)
	sub := connectTest(t, b, "sub")
	if err := Wait(sub.Subscribe("big/#", 1, func(_ paho.Client, m paho.Message) { got <- len(m.Payload()) }), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	pub := connectTest(t, b, "pub")
	pub.Publish("big/x", 1, false, make([]byte, 100<<10)).WaitTimeout(2 * time.Second)
	pub2 := connectTest(t, b, "pub2")
	if err := Wait(pub2.Publish("big/y", 1, false, []byte("small")), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n != len("small") {
			t.Fatalf("a %d-byte payload passed a 64 KiB packet limit", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the small message after the oversize one never arrived")
	}
}

func connectTest(t *testing.T, b *Embedded, id string) paho.Client {
	t.Helper()
	opts, err := Config{Broker: b.URL(), ClientID: id}.ClientOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(opts.SetAutoReconnect(false).SetConnectRetry(false))
	if err := Wait(c.Connect(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}
