package mqtttest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// TestSupervisorRoutesByIDDeviceAndAgent: a fake agent echoes each command
// as a result and publishes a device state and its status; the supervisor
// hands each to the caller waiting for it.
func TestSupervisorRoutesByIDDeviceAndAgent(t *testing.T) {
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	sup := NewSupervisor(t, b.URL(), Options{ClientID: "sup", Timeout: 5 * time.Second})
	online := sup.WatchOnline("gw1")
	fake := fakeAgent(t, b.URL())
	publish(t, fake, protocol.Topics{}.AgentStatus("gw1"), protocol.AgentStatus{Online: true})
	select {
	case <-online:
	case <-time.After(5 * time.Second):
		t.Fatal("online status not seen")
	}

	for _, id := range []string{"c1", "c2"} {
		if r := sup.Send(t, "pump1", protocol.Command{ID: id, Op: "set"}); r.ID != id || r.Device != "pump1" {
			t.Fatalf("result %+v for command %s", r, id)
		}
	}
	publish(t, fake, protocol.Topics{}.DeviceState("pump1"), protocol.DeviceState{Device: "pump1", Online: false})
	publish(t, fake, protocol.Topics{}.DeviceState("pump1"), protocol.DeviceState{Device: "pump1", Online: true})
	sup.WaitState(t, "pump1", true)
}

// TestReplyTopicInReplyNamespace: the supervisor's reply topic lies in
// the reply namespace (the agent's default reply rule accepts it), and a
// result sent there (or to a subtopic) reaches Wait — also when a
// ReplyTopics filter covers it, then only once.
func TestReplyTopicInReplyNamespace(t *testing.T) {
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	fakeAgent(t, b.URL())
	tests := []struct {
		name   string
		extra  []string
		suffix string
	}{
		{name: "own topic", suffix: ""},
		{name: "subtopic", suffix: "/cmds"},
		{name: "covered by ReplyTopics", extra: []string{"fencegate/v1/replies/#"}, suffix: "/x"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sup := NewSupervisor(t, b.URL(), Options{ClientID: fmt.Sprintf("sup%d", i), ReplyTopics: tc.extra, Timeout: 5 * time.Second})
			if want := (protocol.Topics{}).ReplyTopic(fmt.Sprintf("sup%d", i)); sup.ReplyTo() != want {
				t.Fatalf("ReplyTo %q", sup.ReplyTo())
			}
			if err := (protocol.ReplyRule{}).Check(sup.ReplyTo() + tc.suffix); err != nil {
				t.Fatal(err)
			}
			id := "r" + tc.name
			r := sup.Send(t, "pump1", protocol.Command{ID: id, Op: "set", ReplyTo: sup.ReplyTo() + tc.suffix})
			if r.ID != id {
				t.Fatalf("result %+v", r)
			}
			sup.Publish(t, "pump1", protocol.Command{ID: "after-" + id, Op: "set", ReplyTo: sup.ReplyTo() + tc.suffix})
			sup.Wait(t, "after-"+id) // results arrive in order: a duplicate of id would be in by now
			select {
			case dup := <-sup.resultChan(id):
				t.Fatalf("result delivered twice: %+v", dup)
			default:
			}
		})
	}
}

// fakeAgent answers every command with an applied result of its id, on
// its reply_to topic if it has one.
func fakeAgent(t *testing.T, broker string) paho.Client {
	t.Helper()
	opts, err := mqtt.Config{Broker: broker, ClientID: "fake"}.ClientOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(opts)
	if err := mqtt.Wait(c.Connect(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(100) })
	tp := protocol.Topics{}
	err = mqtt.Wait(c.Subscribe(tp.AllDeviceCommands(), 1, func(c paho.Client, m paho.Message) {
		var cmd protocol.Command
		device, _, _ := tp.ParseDeviceTopic(m.Topic())
		if json.Unmarshal(m.Payload(), &cmd) == nil {
			b, _ := json.Marshal(protocol.Result{ID: cmd.ID, Device: device, Status: protocol.StatusApplied, Code: protocol.CodeOK})
			to := tp.DeviceResults(device)
			if cmd.ReplyTo != "" {
				to = cmd.ReplyTo
			}
			c.Publish(to, 1, false, b)
		}
	}), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func publish(t *testing.T, c paho.Client, topic string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := mqtt.Wait(c.Publish(topic, 1, false, b), 10*time.Second); err != nil {
		t.Fatal(err)
	}
}
