package mqttrelay

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/devices/mqttrelay/relaytest"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// plugConfig is the relay config of a Tasmota-like plug at base.
func plugConfig(base string) Config {
	return Config{
		Availability: &Availability{Topic: relaytest.LWTTopic(base)},
		Ops: []Op{
			{Name: "power", Topic: relaytest.CommandTopic(base), Payload: "{{.state}}", Idempotent: true,
				Confirm: &Confirm{Topic: relaytest.ResultTopic(base), JSONField: "POWER", Equals: "{{.state}}", Timeout: 5 * time.Second}},
			{Name: "toggle", Topic: relaytest.CommandTopic(base), Payload: "TOGGLE",
				Confirm: &Confirm{Topic: relaytest.ResultTopic(base), JSONField: "POWER", Pattern: "^(ON|OFF)$", Timeout: 5 * time.Second}},
			{Name: "blink", Topic: relaytest.CommandTopic(base), Payload: "BLINK"},
		},
	}
}

type rig struct {
	broker *mqtt.Embedded
	plug   *relaytest.Controller
	relay  *Relay
	avail  chan bool
}

func newRig(t *testing.T, mutate func(*Config)) *rig {
	t.Helper()
	g := startRig(t)
	cfg := plugConfig("plug1")
	if mutate != nil {
		mutate(&cfg)
	}
	g.open(t, cfg)
	return g
}

// startRig starts the broker and the controller; open adds the relay.
func startRig(t *testing.T) *rig {
	t.Helper()
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	g := &rig{broker: b, avail: make(chan bool, 16)}
	g.plug = relaytest.Start(t, relaytest.Options{Broker: b.URL(), Base: "plug1"})
	return g
}

// open opens the relay with cfg and waits until it sees the controller
// online.
func (g *rig) open(t *testing.T, cfg Config) {
	t.Helper()
	var err error
	if g.relay, err = Open("plug1", cfg, g.broker.URL(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.relay.Close() })
	g.relay.OnAvailability(func(ok bool, _ string) { g.avail <- ok })
	g.waitAvailable(t)
	for len(g.avail) > 0 { // reports from before the retained Online arrived
		<-g.avail
	}
}

// waitAvailable waits until the relay has seen the retained Online LWT.
func (g *rig) waitAvailable(t *testing.T) {
	t.Helper()
	for range 2000 {
		g.relay.mu.Lock()
		ok, _ := g.relay.availableLocked()
		g.relay.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("relay never saw the controller online")
}

func (g *rig) wantAvail(t *testing.T, want bool) {
	t.Helper()
	select {
	case got := <-g.avail:
		if got != want {
			t.Fatalf("availability %v, want %v", got, want)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("no availability report (want %v)", want)
	}
}

func cmd(id, op, args string) devices.Command {
	c := devices.Command{ID: id, Op: op, Token: fence.Token{Domain: "plant", Epoch: 1, Seq: 1, Holder: "sup", TTLms: 1000}}
	if args != "" {
		c.Args = json.RawMessage(args)
	}
	return c
}

func codeOf(err error) devices.Code { return devices.CodeOf(err) }

// TestConfirmationSkipsInterleavedTelemetry: the controller publishes two
// unrelated messages on the result topic before its confirmation; the
// relay confirms with the matching one.
func TestConfirmationSkipsInterleavedTelemetry(t *testing.T) {
	g := newRig(t, nil)
	for _, state := range []string{"ON", "OFF", "ON"} {
		out, err := g.relay.Apply(context.Background(), cmd("c-"+state, "power", `{"state":"`+state+`"}`))
		if err != nil {
			t.Fatalf("power %s: %v", state, err)
		}
		var o map[string]string
		if err := json.Unmarshal(out, &o); err != nil || o["payload"] != state || o["topic"] != "plug1/stat/RESULT" {
			t.Fatalf("output %s, want payload %s on plug1/stat/RESULT", out, state)
		}
		if g.plug.Power() != state {
			t.Fatalf("plug is %s, want %s", g.plug.Power(), state)
		}
	}
	if got := g.plug.Received(); strings.Join(got, ",") != "ON,OFF,ON" {
		t.Fatalf("plug received %q", got)
	}
}

func TestPatternAndUnconfirmedOps(t *testing.T) {
	g := newRig(t, nil)
	out, err := g.relay.Apply(context.Background(), cmd("t1", "toggle", ""))
	if err != nil || !strings.Contains(string(out), `"payload":"OFF"`) {
		t.Fatalf("toggle: %s, %v", out, err)
	}
	out, err = g.relay.Apply(context.Background(), cmd("b1", "blink", ""))
	if err != nil || !strings.Contains(string(out), `"payload":"BLINK"`) {
		t.Fatalf("blink: %s, %v", out, err)
	}
	g.plug.WaitReceived(2)
}

// TestNoConfirmationIsInDoubt: the broker took the command (PUBACK) and
// the controller did not confirm it: it may have reached the device, so the
// answer is in_doubt, not device_timeout (failed).
func TestNoConfirmationIsInDoubt(t *testing.T) {
	g := newRig(t, func(c *Config) { c.Ops[0].Confirm.Timeout = 200 * time.Millisecond })
	g.plug.SetMute(true)
	_, err := g.relay.Apply(context.Background(), cmd("c1", "power", `{"state":"ON"}`))
	if codeOf(err) != devices.CodeInDoubt {
		t.Fatalf("err = %v, want in_doubt", err)
	}
	if got := g.plug.WaitReceived(1); got[0] != "ON" {
		t.Fatalf("plug received %q: the command was sent, only unconfirmed", got)
	}
}

func TestDeadlineBeforeConfirmationIsInDoubt(t *testing.T) {
	g := newRig(t, nil)
	g.plug.SetMute(true)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := g.relay.Apply(ctx, cmd("c1", "power", `{"state":"ON"}`)); codeOf(err) != devices.CodeInDoubt {
		t.Fatalf("err = %v, want in_doubt", err)
	}
}

func TestOfflineControllerIsUnavailable(t *testing.T) {
	g := newRig(t, nil)
	g.plug.SetOnline(false)
	g.wantAvail(t, false)
	_, err := g.relay.Apply(context.Background(), cmd("c1", "power", `{"state":"ON"}`))
	if codeOf(err) != devices.CodeDeviceUnavailable {
		t.Fatalf("err = %v, want device_unavailable", err)
	}
	g.plug.SetOnline(true)
	g.wantAvail(t, true)
	if _, err := g.relay.Apply(context.Background(), cmd("c2", "power", `{"state":"ON"}`)); err != nil {
		t.Fatalf("after Online: %v", err)
	}
	if got := g.plug.Received(); len(got) != 1 {
		t.Fatalf("plug received %q; the command while offline must not be published", got)
	}
}

func TestOfflineWhileWaitingIsInDoubt(t *testing.T) {
	g := newRig(t, nil)
	g.plug.SetMute(true)
	errc := make(chan error, 1)
	go func() {
		_, err := g.relay.Apply(context.Background(), cmd("c1", "power", `{"state":"ON"}`))
		errc <- err
	}()
	g.plug.WaitReceived(1)
	g.plug.SetOnline(false)
	if err := <-errc; codeOf(err) != devices.CodeInDoubt {
		t.Fatalf("err = %v, want in_doubt", err)
	}
}

func TestArgsThatDoNotFillTheTemplate(t *testing.T) {
	g := newRig(t, nil)
	tests := []struct{ name, args string }{
		{name: "missing arg", args: `{"level":1}`},
		{name: "not an object", args: `[1]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := g.relay.Apply(context.Background(), cmd("c", "power", tc.args)); codeOf(err) != devices.CodeDeviceError {
				t.Fatalf("err = %v, want device_error", err)
			}
		})
	}
	if _, err := g.relay.Apply(context.Background(), cmd("c", "dance", "")); codeOf(err) != devices.CodeUnknownOp {
		t.Fatalf("err = %v, want unknown_op", err)
	}
	if got := g.plug.Received(); len(got) != 0 {
		t.Fatalf("plug received %q, want nothing", got)
	}
}

func TestValueOf(t *testing.T) {
	tests := []struct {
		name, payload, field, want string
		ok                         bool
	}{
		{name: "whole payload", payload: "ON", want: "ON", ok: true},
		{name: "string field", payload: `{"POWER":"ON"}`, field: "POWER", want: "ON", ok: true},
		{name: "nested number", payload: `{"ENERGY":{"Power":12.5}}`, field: "ENERGY.Power", want: "12.5", ok: true},
		{name: "absent field", payload: `{"Dimmer":30}`, field: "POWER"},
		{name: "not JSON", payload: `heap low`, field: "POWER"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := valueOf([]byte(tc.payload), tc.field)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("valueOf = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{name: "no ops", doc: `{}`, want: "devices[0].settings.ops"},
		{name: "wildcard topic", doc: `{ops: [{name: p, topic: "cmnd/+/POWER"}]}`, want: "devices[0].settings.ops[0].topic"},
		{name: "both rules", doc: `{ops: [{name: p, topic: t, confirm: {topic: s, equals: a, pattern: b}}]}`,
			want: "devices[0].settings.ops[0].confirm"},
		{name: "bad template", doc: `{ops: [{name: p, topic: t, payload: "{{.x"}]}`, want: "devices[0].settings.ops[0].payload"},
		{name: "unknown key", doc: `{colour: red, ops: []}`, want: "colour"},
		{name: "retained command", doc: `{ops: [{name: p, topic: t, retain: true}]}`, want: "devices[0].settings.ops[0].retain: true"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var n yaml.Node
			if err := yaml.Unmarshal([]byte(tc.doc), &n); err != nil {
				t.Fatal(err)
			}
			_, err := devices.Open("mqttrelay", "plug1", devices.Settings{Node: n.Content[0], Path: "devices[0].settings",
				Broker: "tcp://127.0.0.1:1"}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %q", err, tc.want)
			}
		})
	}
}
