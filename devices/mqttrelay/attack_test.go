package mqttrelay

import (
	"context"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/devices/mqttrelay/relaytest"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// holdRetained is a broker hook that, once armed, holds back the retained
// messages on topic that the broker replays to the relay's new
// subscription, until released: a broker that is slow to replay, or a
// large retained set ahead of it.
type holdRetained struct {
	mochi.HookBase
	topic   string
	armed   chan struct{} // closed to arm
	release chan struct{} // closed to let them through
	once    sync.Once
}

func (h *holdRetained) ID() string { return "hold-retained" }

func (h *holdRetained) Provides(b byte) bool { return b == mochi.OnPacketEncode }

func (h *holdRetained) OnPacketEncode(cl *mochi.Client, pk packets.Packet) packets.Packet {
	if cl.ID != relayID || pk.FixedHeader.Type != packets.Publish || !pk.FixedHeader.Retain || pk.TopicName != h.topic {
		return pk
	}
	select {
	case <-h.armed:
		<-h.release
	default:
	}
	return pk
}

func (h *holdRetained) open() { h.once.Do(func() { close(h.release) }) }

// watch subscribes a probe client to topic; every payload arriving there
// is sent on the returned channel.
func watch(t *testing.T, broker, topic string) <-chan string {
	t.Helper()
	got := make(chan string, 16)
	opts, err := mqtt.Config{Broker: broker, ClientID: "attack-probe"}.ClientOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(opts)
	if err := mqtt.Wait(c.Connect(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(100) })
	onMsg := func(_ paho.Client, m paho.Message) { got <- string(m.Payload()) }
	if err := mqtt.Wait(c.Subscribe(topic, 1, onMsg), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return got
}

// waitConnected waits until the relay's own reconnect loop has a session
// with its subscriptions (onConnect ran).
func (g *rig) waitConnected(t *testing.T) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		g.relay.mu.Lock()
		c := g.relay.connected
		g.relay.mu.Unlock()
		if c {
			return
		}
	}
	t.Fatal("relay never reconnected")
}

// TestAttackStaleOnlineAfterReconnect breaks the relay's contract ("while
// the controller is offline, commands fail device_unavailable without being
// published") and with it the rule (a command published to an offline
// controller is answered, then waits in the broker for the controller — a
// persistent session delivers it on its return, after newer tokens): the
// controller goes offline (its retained LWT says Offline) while the relay is
// between sessions; the relay reconnects, marks itself connected after the
// SUBACK and keeps the "online" it had before the loss, so until the
// broker's replay of the retained Offline arrives, the device counts as
// available and a command is published and reported applied.
func TestAttackStaleOnlineAfterReconnect(t *testing.T) {
	g := newRig(t, nil)
	hook := &holdRetained{topic: relaytest.LWTTopic("plug1"), armed: make(chan struct{}), release: make(chan struct{})}
	if err := g.broker.Server().AddHook(hook, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hook.open)
	commands := watch(t, g.broker.URL(), relaytest.CommandTopic("plug1"))
	kick(t, g.broker)
	g.wantAvail(t, false)
	g.plug.SetOnline(false) // retained Offline, while the relay has no session
	close(hook.armed)
	g.waitConnected(t)

	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := g.relay.Apply(ctx, cmd("b1", "blink", ""))
		errc <- err
	}()
	select {
	case err := <-errc:
		hook.open()
		if codeOf(err) != devices.CodeDeviceUnavailable {
			t.Fatalf("blink while the controller's retained LWT says Offline: %v, want device_unavailable", err)
		}
	case p := <-commands:
		hook.open()
		err := <-errc
		t.Fatalf("blink was published (%q reached the command topic) and answered %v while the controller's retained LWT says Offline; want device_unavailable, nothing published", p, err)
	case <-time.After(30 * time.Second):
		t.Fatal("blink neither answered nor published")
	}
}
