package mqtttest

import (
	"encoding/json"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

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
	publish(t, fake, mqtt.Topics{}.AgentStatus("gw1"), mqtt.AgentStatus{Online: true})
	select {
	case <-online:
	case <-time.After(5 * time.Second):
		t.Fatal("online status not seen")
	}

	for _, id := range []string{"c1", "c2"} {
		if r := sup.Send(t, "pump1", mqtt.Command{ID: id, Op: "set"}); r.ID != id || r.Device != "pump1" {
			t.Fatalf("result %+v for command %s", r, id)
		}
	}
	publish(t, fake, mqtt.Topics{}.DeviceState("pump1"), mqtt.DeviceState{Device: "pump1", Online: false})
	publish(t, fake, mqtt.Topics{}.DeviceState("pump1"), mqtt.DeviceState{Device: "pump1", Online: true})
	sup.WaitState(t, "pump1", true)
}

// fakeAgent answers every command with an applied result of its id.
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
	tp := mqtt.Topics{}
	err = mqtt.Wait(c.Subscribe(tp.AllDeviceCommands(), 1, func(c paho.Client, m paho.Message) {
		var cmd mqtt.Command
		device, _, _ := tp.ParseDeviceTopic(m.Topic())
		if json.Unmarshal(m.Payload(), &cmd) == nil {
			b, _ := json.Marshal(mqtt.Result{ID: cmd.ID, Device: device, Status: mqtt.StatusApplied, Code: mqtt.CodeOK})
			c.Publish(tp.DeviceResults(device), 1, false, b)
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
