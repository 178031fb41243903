package mqtt

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
	"go.uber.org/goleak"
)

// waitEvent is the generous bound of every wait for an event here.
const waitEvent = 15 * time.Second

// pahoDispatch is paho's message router, which outlives Disconnect briefly.
var pahoDispatch = goleak.IgnoreTopFunction("github.com/eclipse/paho.mqtt.golang.(*router).matchAndDispatch")

func startBroker(t *testing.T, addr string) *Embedded {
	t.Helper()
	b, err := StartEmbedded(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func dialCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitEvent)
	t.Cleanup(cancel)
	return ctx
}

// collect is a handler that hands payloads to a buffered channel.
func collect() (paho.MessageHandler, chan string) {
	ch := make(chan string, 16)
	return func(_ paho.Client, m paho.Message) {
		select {
		case ch <- string(m.Payload()):
		default:
		}
	}, ch
}

func expect(t *testing.T, ch chan string, want string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	case <-time.After(waitEvent):
		t.Fatalf("%q never arrived", want)
	}
}

func publishOnce(t *testing.T, b *Embedded, topic, payload string) {
	t.Helper()
	if err := b.Server().Publish(topic, []byte(payload), false, 1); err != nil {
		t.Fatal(err)
	}
}

// TestDialAwaitsFirstSubscription: when Dial returns, the broker already
// routes to the subscriptions — one message published once arrives, on
// each filter to its own handler.
func TestDialAwaitsFirstSubscription(t *testing.T) {
	b := startBroker(t, "127.0.0.1:0")
	hA, a := collect()
	hB, bb := collect()
	c, err := Dial(dialCtx(t), Config{Broker: b.URL(), ClientID: "d1"}, map[string]paho.MessageHandler{"x/a": hA, "x/b/+": hB})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(100)
	publishOnce(t, b, "x/a", "one")
	publishOnce(t, b, "x/b/1", "two")
	expect(t, a, "one")
	expect(t, bb, "two")
}

// TestDialResubscribesAfterKick: a client the broker drops reconnects
// and subscribes again, every time; once it is disconnected no goroutine
// of its connections is left.
func TestDialResubscribesAfterKick(t *testing.T) {
	b := startBroker(t, "127.0.0.1:0")
	before := goleak.IgnoreCurrent()
	h, got := collect()
	subscribed := make(chan error, 8)
	c, err := Dialer{Config: Config{Broker: b.URL(), ClientID: "kicked", MaxReconnectInterval: 100 * time.Millisecond},
		Subs: map[string]paho.MessageHandler{"k/#": h}, OnSubscribed: func(_ paho.Client, err error) { subscribed <- err }}.Dial(dialCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	awaitSubscribed(t, subscribed)
	for range 3 {
		kick(t, b, "kicked")
		awaitSubscribed(t, subscribed)
		publishOnce(t, b, "k/x", "after kick")
		expect(t, got, "after kick")
	}
	c.Disconnect(100)
	if err := goleak.Find(before, pahoDispatch); err != nil {
		t.Fatal(err)
	}
}

// TestDialResubscribesAfterBrokerRestart: a broker restarted on the same
// address (retaining nothing) gets the subscriptions again.
func TestDialResubscribesAfterBrokerRestart(t *testing.T) {
	b, err := StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := b.Addr()
	h, got := collect()
	subscribed := make(chan error, 8)
	c, err := Dialer{Config: Config{Broker: b.URL(), ClientID: "restart", MaxReconnectInterval: 100 * time.Millisecond},
		Subs: map[string]paho.MessageHandler{"r/#": h}, OnSubscribed: func(_ paho.Client, err error) { subscribed <- err }}.Dial(dialCtx(t))
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	defer c.Disconnect(100)
	awaitSubscribed(t, subscribed)
	b.Close()
	b2 := startBroker(t, addr)
	awaitSubscribed(t, subscribed)
	publishOnce(t, b2, "r/x", "after restart")
	expect(t, got, "after restart")
}

func awaitSubscribed(t *testing.T, ch chan error) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitEvent):
		t.Fatal("no (re)subscription")
	}
}

// kick makes the broker drop client id's connection.
func kick(t *testing.T, b *Embedded, id string) {
	t.Helper()
	cl, ok := b.Server().Clients.Get(id)
	if !ok {
		t.Fatalf("client %s is not on the broker", id)
	}
	cl.Stop(errors.New("kicked by the test"))
}

// TestDialFailsOnRefusedSubscription: a broker that refuses one filter
// makes Dial fail, naming it, with nothing left running.
func TestDialFailsOnRefusedSubscription(t *testing.T) {
	addr := startDenyingBroker(t, "denied/#")
	before := goleak.IgnoreCurrent()
	h, _ := collect()
	_, err := Dial(dialCtx(t), Config{Broker: "tcp://" + addr, ClientID: "refused"},
		map[string]paho.MessageHandler{"ok/#": h, "denied/#": h})
	if err == nil || !strings.Contains(err.Error(), "denied/#") || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("err = %v, want a refusal of denied/#", err)
	}
	if err := goleak.Find(before, pahoDispatch); err != nil {
		t.Fatal(err)
	}
}

// TestDialEndsWithContext: an unreachable broker makes Dial return ctx's
// error, with nothing left running.
func TestDialEndsWithContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = Dial(ctx, Config{Broker: "tcp://" + addr, ClientID: "nobody"}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
	if err := goleak.Find(before, pahoDispatch); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(ctx, Config{}, nil); err == nil {
		t.Fatal("no broker URL accepted")
	}
}

// startDenyingBroker starts a mochi broker that refuses subscriptions to
// filter and allows everything else.
func startDenyingBroker(t *testing.T, filter string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := mochi.New(&mochi.Options{InlineClient: true})
	if err := srv.AddHook(&denyHook{filter: filter}, nil); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddListener(listeners.NewNet("deny", ln)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// denyHook allows every client and every topic but one subscription filter.
type denyHook struct {
	mochi.HookBase
	filter string
}

func (h *denyHook) ID() string { return "deny" }

func (h *denyHook) Provides(b byte) bool {
	return b == mochi.OnConnectAuthenticate || b == mochi.OnACLCheck
}

func (h *denyHook) OnConnectAuthenticate(*mochi.Client, packets.Packet) bool { return true }

func (h *denyHook) OnACLCheck(_ *mochi.Client, topic string, write bool) bool {
	return write || topic != h.filter
}
