package mqttapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/lease/mqttapi"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// logLines is a slog.Handler that hands every record's message and error
// to a channel, so a test can await a log line as an event.
type logLines struct{ ch chan string }

func (l logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l logLines) WithGroup(string) slog.Handler            { return l }
func (l logLines) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	select {
	case l.ch <- line:
	default:
	}
	return nil
}

// TestReplyToConfusedDeputy (issue 11 item 4, controller side): a lease
// request whose reply_to names a device command topic, an agent status
// topic, a $ topic or a topic outside the reply namespace gets nothing
// published there, is logged, and grants nothing.
func TestReplyToConfusedDeputy(t *testing.T) {
	b := mustBroker(t)
	logs := logLines{ch: make(chan string, 64)}
	srv, err := mqttapi.New(mqttapi.Config{MQTT: mqtt.Config{Broker: b.URL(), ClientID: "controller"}, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	c, st, _ := leasetest.MustController(t, lease.Config{OnGrant: srv.Announce})
	srv.Start(c)
	t.Cleanup(srv.Close)
	waitReady(srv)
	tp := protocol.Topics{}
	victims := []string{tp.DeviceCommands("pump1"), tp.AgentStatus("gw1"), "tasmota/cmnd/Backlog", "$SYS/x", tp.Replies()}
	seen := make(chan string, 16)
	spy := connect(t, b.URL(), "spy")
	for _, v := range victims[:3] {
		if err := mqtt.Wait(spy.Subscribe(v, 1, func(_ paho.Client, m paho.Message) { seen <- m.Topic() }), waitLong); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range victims {
		payload, _ := json.Marshal(protocol.Request{RequestID: leasetest.ID(), ReplyTo: v, Holder: "mallory", TTLms: 60000})
		if err := mqtt.Wait(spy.Publish(tp.Lease("press", "acquire"), 1, false, payload), waitLong); err != nil {
			t.Fatal(err)
		}
		awaitRefusal(t, logs.ch, seen, v)
	}
	if rec, err := st.Load(context.Background(), "press"); err != nil || rec.Version != 0 {
		t.Fatalf("a request with a bad reply_to changed the store: %+v, %v", rec, err)
	}
	cl := newClient(t, b.URL(), "honest")
	leasetest.Want(t, cl.Do(t, protocol.OpGet, "press", protocol.Request{RequestID: leasetest.ID()}), protocol.CodeReleased)
	select {
	case topic := <-seen:
		t.Fatalf("a lease response was published on %s", topic)
	default:
	}
}

// awaitRefusal waits for the log line refusing reply_to v; a message on a
// spied topic first fails the test.
func awaitRefusal(t *testing.T, logs <-chan string, seen <-chan string, v string) {
	t.Helper()
	deadline := time.After(waitLong)
	for {
		select {
		case line := <-logs:
			if strings.Contains(line, "no reply possible") && strings.Contains(line, "reply_to") {
				return
			}
		case topic := <-seen:
			t.Fatalf("reply_to %q: a lease response was published on %s", v, topic)
		case <-deadline:
			t.Fatalf("reply_to %q: no refusal logged in %v", v, waitLong)
		}
	}
}
