package mqttapi_test

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/lease/mqttapi"
	"github.com/fencegate/fencegate/protocol"
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
//
// A live subscriber is not a faithful copy of the retained grant: the
// broker may deliver our heal to it before the intruder's message it
// answers (the heal overtakes the intruder's message on its way to other
// subscribers). So the test waits until the heal has been seen live, and
// then reads what the broker retains with a fresh subscription — only once
// nothing is being published, since a subscription racing a retained
// publish trips a data race inside the embedded broker (mochi-mqtt issue
// 200).
func TestRetainedGrantHeals(t *testing.T) {
	b := mustBroker(t)
	w := watchGrants(t, b.URL())
	signer, ring := leasetest.MustSigner(t)
	srv, err := mqttapi.New(mqttapi.Config{MQTT: mqtt.Config{Broker: b.URL(), ClientID: "controller"}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start(&verifying{ring: ring})
	t.Cleanup(srv.Close)
	waitReady(srv)
	newest := sign(t, signer, 6)
	srv.Announce(newest)
	w.waitLast(t, newest.Raw)

	foreign, _ := leasetest.MustSigner(t)
	intruder := connect(t, b.URL(), "intruder")
	for name, payload := range map[string][]byte{
		"older valid token": grantJSON(sign(t, signer, 5).Raw),
		"foreign key":       grantJSON(sign(t, foreign, 99).Raw),
		"garbage":           []byte("{not json"),
	} {
		w.reset()
		publishRetained(t, intruder, payload)
		w.waitSeen(t, newest.Raw)
		if got := readRetainedGrant(t, b.URL()); got != newest.Raw {
			t.Fatalf("after %s the retained grant is %q", name, got)
		}
	}

	// A newer verified grant from another replica is adopted, not overwritten.
	newer := sign(t, signer, 7)
	w.reset()
	publishRetained(t, intruder, grantJSON(newer.Raw))
	w.waitLast(t, newer.Raw)
	time.Sleep(300 * time.Millisecond) // time for a wrong overwrite to show
	if got := w.last(); got != newer.Raw {
		t.Fatalf("a newer replica's grant was overwritten with %q", got)
	}
	if got := readRetainedGrant(t, b.URL()); got != newer.Raw {
		t.Fatalf("a newer replica's grant was overwritten: the broker retains %q", got)
	}
}

// grantWatcher records the grants of domain "press" as they arrive.
type grantWatcher struct {
	mu     sync.Mutex // guards tokens
	tokens []string
}

func watchGrants(t *testing.T, broker string) *grantWatcher {
	t.Helper()
	w := &grantWatcher{}
	c := connect(t, broker, "watcher")
	handler := func(_ paho.Client, m paho.Message) {
		var g protocol.Grant
		if json.Unmarshal(m.Payload(), &g) != nil {
			g.Token = "(undecodable)"
		}
		w.mu.Lock()
		w.tokens = append(w.tokens, g.Token)
		w.mu.Unlock()
	}
	if err := mqtt.Wait(c.Subscribe(protocol.Topics{}.LeaseGrant("press"), 1, handler), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *grantWatcher) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.tokens) == 0 {
		return ""
	}
	return w.tokens[len(w.tokens)-1]
}

func (w *grantWatcher) reset() {
	w.mu.Lock()
	w.tokens = nil
	w.mu.Unlock()
}

// waitLast waits up to 10 s for want to be the last grant seen, and returns
// the last one seen.
func (w *grantWatcher) waitLast(t *testing.T, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && w.last() != want {
		time.Sleep(10 * time.Millisecond)
	}
	return w.last()
}

// waitSeen waits up to 10 s for want to be among the grants seen since the
// last reset.
func (w *grantWatcher) waitSeen(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		seen := slices.Contains(w.tokens, want)
		w.mu.Unlock()
		if seen {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readRetainedGrant subscribes afresh to the grant topic of "press" and
// returns the token of the retained grant the broker sends ("" if none
// comes within 10 s).
func readRetainedGrant(t *testing.T, broker string) string {
	t.Helper()
	got := make(chan string, 1)
	c := connect(t, broker, "reader")
	handler := func(_ paho.Client, m paho.Message) {
		var g protocol.Grant
		if json.Unmarshal(m.Payload(), &g) != nil {
			g.Token = "(undecodable)"
		}
		select {
		case got <- g.Token:
		default:
		}
	}
	if err := mqtt.Wait(c.Subscribe(protocol.Topics{}.LeaseGrant("press"), 1, handler), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	defer c.Unsubscribe(protocol.Topics{}.LeaseGrant("press"))
	select {
	case tok := <-got:
		return tok
	case <-time.After(10 * time.Second):
		return ""
	}
}

func connect(t *testing.T, broker, id string) paho.Client {
	t.Helper()
	opts, _ := mqtt.Config{Broker: broker, ClientID: id + "-" + leasetest.ID()}.ClientOptions(nil)
	c := paho.NewClient(opts)
	if err := mqtt.Wait(c.Connect(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(50) })
	return c
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
	b, _ := json.Marshal(protocol.Grant{Token: raw})
	return b
}

func publishRetained(t *testing.T, c paho.Client, payload []byte) {
	t.Helper()
	if err := mqtt.Wait(c.Publish(protocol.Topics{}.LeaseGrant("press"), 1, true, payload), 10*time.Second); err != nil {
		t.Fatal(err)
	}
}
