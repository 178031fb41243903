package mqttapi_test

import (
	"encoding/json"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/lease/mqttapi"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// verifying answers requests like counting and verifies tokens with a ring.
type verifying struct {
	counting
	ring *fence.KeyRing
}

func (v *verifying) VerifyToken(raw string) (fence.Token, error) { return v.ring.Verify(raw) }

// TestRetainedGrantHeals: whatever lands on a grant topic after our newest
// grant — an older valid token (a replica republishing late), a token signed
// by a foreign key, garbage — the retained grant comes back to our newest.
func TestRetainedGrantHeals(t *testing.T) {
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	signer, ring := leasetest.MustSigner(t)
	srv, err := mqttapi.New(mqttapi.Config{MQTT: mqtt.Config{Broker: b.URL(), ClientID: "controller"}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start(&verifying{ring: ring})
	defer srv.Close()
	waitReady(srv)
	newest := sign(t, signer, 6)
	srv.Announce(newest)
	waitRetained(t, b.URL(), newest.Raw)

	foreign, _ := leasetest.MustSigner(t)
	for name, payload := range map[string][]byte{
		"older valid token": grantJSON(sign(t, signer, 5).Raw),
		"foreign key":       grantJSON(sign(t, foreign, 99).Raw),
		"garbage":           []byte("{not json"),
	} {
		publishRetained(t, b.URL(), payload)
		if got := waitRetained(t, b.URL(), newest.Raw); got != newest.Raw {
			t.Fatalf("after %s the retained grant is %q", name, got)
		}
	}

	// A newer verified grant from another replica is adopted, not overwritten.
	newer := sign(t, signer, 7)
	publishRetained(t, b.URL(), grantJSON(newer.Raw))
	time.Sleep(200 * time.Millisecond) // give a wrong heal time to happen
	if got := waitRetained(t, b.URL(), newer.Raw); got != newer.Raw {
		t.Fatalf("a newer replica's grant was overwritten with %q", got)
	}
}

func sign(t *testing.T, s *fence.Signer, seq uint64) fence.Token {
	t.Helper()
	tok, err := s.Sign(fence.Token{Domain: "press", Epoch: 1, Seq: seq, Holder: "h", IssuedAt: 1, TTLms: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func grantJSON(raw string) []byte {
	b, _ := json.Marshal(mqtt.Grant{Token: raw})
	return b
}

func publishRetained(t *testing.T, broker string, payload []byte) {
	t.Helper()
	opts, _ := mqtt.Config{Broker: broker, ClientID: "intruder"}.ClientOptions(nil)
	c := paho.NewClient(opts)
	if err := mqtt.Wait(c.Connect(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(50)
	if err := mqtt.Wait(c.Publish(mqtt.Topics{}.LeaseGrant("press"), 1, true, payload), 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// waitRetained reads the retained grant with fresh subscriptions until it is
// want or 10 s have passed, and returns the last token seen.
func waitRetained(t *testing.T, broker, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		last = readRetained(t, broker)
		if last == want {
			return last
		}
		time.Sleep(20 * time.Millisecond)
	}
	return last
}

func readRetained(t *testing.T, broker string) string {
	t.Helper()
	got := make(chan string, 4)
	opts, _ := mqtt.Config{Broker: broker, ClientID: "reader"}.ClientOptions(nil)
	c := paho.NewClient(opts)
	if err := mqtt.Wait(c.Connect(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(50)
	c.Subscribe(mqtt.Topics{}.LeaseGrant("press"), 1, func(_ paho.Client, m paho.Message) {
		var g mqtt.Grant
		_ = json.Unmarshal(m.Payload(), &g)
		select {
		case got <- g.Token:
		default:
		}
	})
	select {
	case s := <-got:
		return s
	case <-time.After(500 * time.Millisecond):
		return ""
	}
}
