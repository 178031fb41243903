package mqttrelay

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/devices/mqttrelay/relaytest"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// relayID is the relay's default client id in the rig.
const relayID = "fencegate-relay-plug1"

// lostAck is a broker hook that, once armed, takes the relay's next
// publish on topic, delivers it to the subscribers and then drops the
// relay's connection instead of acknowledging it: the command reached the
// controller, the PUBACK never reached the relay.
type lostAck struct {
	mochi.HookBase
	srv     *mochi.Server
	topic   string
	swallow bool // instead: drop the publish, keep the connection, send no PUBACK
	armed   atomic.Bool
	hits    atomic.Int32
}

func (h *lostAck) ID() string { return "lost-ack" }

func (h *lostAck) Provides(b byte) bool { return b == mochi.OnPublish }

func (h *lostAck) OnPublish(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.ID != relayID || pk.TopicName != h.topic || !h.armed.CompareAndSwap(true, false) {
		return pk, nil
	}
	h.hits.Add(1)
	if h.swallow {
		return pk, packets.ErrRejectPacket
	}
	if err := h.srv.Publish(pk.TopicName, pk.Payload, false, 1); err != nil {
		return pk, err
	}
	cl.Stop(errors.New("test: connection dropped before the PUBACK"))
	return pk, packets.ErrRejectPacket
}

// kick drops the relay's connection at the broker.
func kick(t *testing.T, b *mqtt.Embedded) {
	t.Helper()
	cl, ok := b.Server().Clients.Get(relayID)
	if !ok {
		t.Fatalf("relay %s not connected to the broker", relayID)
	}
	cl.Stop(errors.New("test: connection dropped"))
}

// TestPublishWithoutAckIsInDoubtAndNeverResent (issue 12, item 3): the
// command reaches the controller but the broker connection drops before
// the PUBACK. The answer is in_doubt, and after the relay reconnects the
// command is never published again (paho's store of unacknowledged
// publishes would resend it: the plug switches long after the answer).
func TestPublishWithoutAckIsInDoubtAndNeverResent(t *testing.T) {
	g := newRig(t, nil)
	hook := &lostAck{srv: g.broker.Server(), topic: relaytest.CommandTopic("plug1")}
	if err := g.broker.Server().AddHook(hook, nil); err != nil {
		t.Fatal(err)
	}
	hook.armed.Store(true)
	g.plug.SetMute(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := g.relay.Apply(ctx, cmd("c1", "power", `{"state":"ON"}`))
	if codeOf(err) != devices.CodeInDoubt {
		t.Errorf("err = %v, want in_doubt (the command went out, no PUBACK came back)", err)
	}
	if hook.hits.Load() != 1 {
		t.Fatalf("the broker hook saw %d publishes, want 1", hook.hits.Load())
	}
	g.wantAvail(t, false)
	g.wantAvail(t, true)
	if _, err := g.relay.Apply(context.Background(), cmd("b1", "blink", "")); err != nil {
		t.Fatalf("blink after the reconnect: %v", err)
	}
	if got := g.plug.WaitReceived(2); !slices.Equal(got, []string{"ON", "BLINK"}) {
		t.Fatalf("controller received %q, want [ON BLINK]: the unacknowledged ON must not be resent", got)
	}
}

// TestPublishTimedOutIsInDoubtAndNeverResent (issue 12, item 3): the
// broker never acknowledges the publish and the deadline passes: the
// answer is in_doubt, and when the connection is lost later the command is
// not resent by the reconnect (before, it was reported device_timeout and
// paho resent it on the next reconnect).
func TestPublishTimedOutIsInDoubtAndNeverResent(t *testing.T) {
	g := newRig(t, nil)
	hook := &lostAck{srv: g.broker.Server(), topic: relaytest.CommandTopic("plug1"), swallow: true}
	if err := g.broker.Server().AddHook(hook, nil); err != nil {
		t.Fatal(err)
	}
	hook.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := g.relay.Apply(ctx, cmd("c1", "power", `{"state":"ON"}`)); codeOf(err) != devices.CodeInDoubt {
		t.Errorf("err = %v, want in_doubt (published, never acknowledged)", err)
	}
	if cl, ok := g.broker.Server().Clients.Get(relayID); ok {
		cl.Stop(errors.New("test: a later connection loss"))
	}
	g.blinkOnceAvailable(t)
	if got := g.plug.WaitReceived(1); slices.Contains(got, "ON") {
		t.Fatalf("controller received %q: the ON answered in_doubt was resent", got)
	}
}

// blinkOnceAvailable applies blink, waiting for availability reports
// while the relay is reconnecting.
func (g *rig) blinkOnceAvailable(t *testing.T) {
	t.Helper()
	for range 10 {
		_, err := g.relay.Apply(context.Background(), cmd("b1", "blink", ""))
		if err == nil {
			return
		}
		if codeOf(err) != devices.CodeDeviceUnavailable {
			t.Fatalf("blink: %v", err)
		}
		g.waitReport(t, true)
	}
	t.Fatal("blink never applied")
}

// waitReport waits for an availability report of want, skipping others.
func (g *rig) waitReport(t *testing.T, want bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case got := <-g.avail:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("no availability report %v", want)
		}
	}
}

// TestBrokerLostWhileWaitingIsInDoubt (issue 12, item 11): the relay loses
// its broker while it waits for the confirmation. The answer is in_doubt at
// once, and the status the broker replays to the relay's new subscription
// (retained, from before the command) does not confirm it.
func TestBrokerLostWhileWaitingIsInDoubt(t *testing.T) {
	g := startRig(t)
	g.plug.PublishRetained(relaytest.ResultTopic("plug1"), `{"POWER":"ON"}`) // before the relay subscribes: it only ever gets it retained
	cfg := plugConfig("plug1")
	cfg.Ops[0].Confirm.Timeout = time.Minute
	g.open(t, cfg)
	g.plug.SetMute(true)
	errc := make(chan error, 1)
	go func() {
		_, err := g.relay.Apply(context.Background(), cmd("c1", "power", `{"state":"ON"}`))
		errc <- err
	}()
	g.plug.WaitReceived(1)
	kick(t, g.broker)
	select {
	case err := <-errc:
		if codeOf(err) != devices.CodeInDoubt || !strings.Contains(err.Error(), "broker") {
			t.Fatalf("err = %v, want in_doubt naming the lost broker connection", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("apply still waiting after the relay lost its broker")
	}
}

// TestRetainedStatusDoesNotConfirm (issue 12, item 11): a retained status
// (one the broker replays to a new subscription, as the relay's after each
// reconnect) is old news: it cannot confirm a command in flight.
func TestRetainedStatusDoesNotConfirm(t *testing.T) {
	g := startRig(t)
	g.plug.PublishRetained(relaytest.ResultTopic("plug1"), `{"POWER":"ON"}`) // before the relay subscribes
	cfg := plugConfig("plug1")
	cfg.Ops[0].Confirm.Timeout = 500 * time.Millisecond
	g.open(t, cfg)
	retained := retainedMessage(t, g.broker.URL(), relaytest.ResultTopic("plug1"))
	g.plug.SetMute(true)
	errc := make(chan error, 1)
	go func() {
		_, err := g.relay.Apply(context.Background(), cmd("c1", "power", `{"state":"ON"}`))
		errc <- err
	}()
	g.plug.WaitReceived(1) // the waiter is registered before the publish
	g.relay.onMessage(nil, retained)
	if err := <-errc; codeOf(err) != devices.CodeInDoubt || !strings.Contains(err.Error(), "no confirmation") {
		t.Fatalf("err = %v, want in_doubt for want of a confirmation (the retained status is not one)", err)
	}
}

// retainedMessage subscribes a fresh client to topic and returns the
// retained message the broker replays to it.
func retainedMessage(t *testing.T, broker, topic string) paho.Message {
	t.Helper()
	got := make(chan paho.Message, 1)
	opts, err := mqtt.Config{Broker: broker, ClientID: "probe"}.ClientOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(opts)
	if err := mqtt.Wait(c.Connect(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(100)
	onMsg := func(_ paho.Client, m paho.Message) {
		select {
		case got <- m:
		default:
		}
	}
	if err := mqtt.Wait(c.Subscribe(topic, 1, onMsg), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if !m.Retained() {
			t.Fatalf("message on %s is not retained", topic)
		}
		return m
	case <-time.After(15 * time.Second):
		t.Fatalf("no retained message on %s", topic)
		return nil
	}
}

// TestRetainedCommandIsRefused (issue 12, item 11): a retained command is
// replayed by the broker to the controller whenever it reconnects, long
// after the fence check; the config is refused naming the key and value.
func TestRetainedCommandIsRefused(t *testing.T) {
	cfg := plugConfig("plug1")
	cfg.Ops[1].Retain = true
	err := cfg.Validate("settings")
	if err == nil || !strings.Contains(err.Error(), "settings.ops[1].retain: true") {
		t.Fatalf("Validate = %v, want an error naming settings.ops[1].retain: true", err)
	}
	if _, err := Open("plug1", cfg, "tcp://127.0.0.1:1", nil); err == nil {
		t.Fatal("Open accepted a retained command topic")
	}
}

// TestPublishedTopics: the relay declares the command topics it publishes
// to (once each), so the agent refuses reply_to on them.
func TestPublishedTopics(t *testing.T) {
	g := newRig(t, func(c *Config) {
		c.Ops = append(c.Ops, Op{Name: "dim", Topic: "plug1/cmnd/Dimmer", Payload: "{{.level}}"})
	})
	var tp devices.TopicPublisher = g.relay
	got := tp.PublishedTopics()
	want := []string{"plug1/cmnd/Dimmer", relaytest.CommandTopic("plug1")}
	if !slices.Equal(got, want) {
		t.Fatalf("PublishedTopics = %q, want %q", got, want)
	}
	rule := protocol.ReplyRule{Prefixes: []string{"plug1/"}, Deny: got}
	for _, topic := range got {
		if rule.Check(topic) == nil {
			t.Errorf("reply_to %q allowed, though the relay publishes there", topic)
		}
	}
	if err := rule.Check("plug1/replies/sup"); err != nil {
		t.Fatalf("reply_to plug1/replies/sup: %v, want allowed", err)
	}
}
