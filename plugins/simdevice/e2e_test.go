package simdevice

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/agent"
	_ "github.com/fencegate/fencegate/devices/mqttrelay"
	"github.com/fencegate/fencegate/devices/mqttrelay/relaytest"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/logtest"
	"github.com/fencegate/fencegate/internal/mqtttest"
	_ "github.com/fencegate/fencegate/plugins"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// TestAgentEndToEnd runs an agent with a plugin device (this binary as the
// simdevice plugin) and an MQTT-relayed device (a Tasmota-like controller)
// on a broker, and drives both through MQTT like a supervisor: applies, a
// plugin SIGKILLed mid-command (in_doubt, device offline, then back without
// restarting the agent), stale tokens, and an offline controller.
func TestAgentEndToEnd(t *testing.T) {
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() }) // after the clients' cleanups
	e := startAgent(t, b.URL(), "", "")
	plug := relaytest.Start(t, relaytest.Options{Broker: b.URL(), Base: "plant/relays/plug1"})
	e.waitState(t, "plug1", true)

	e.mustApply(t, "pump1", e.cmd("p1", 1, "set", `{"value":1}`))
	if r := e.mustApply(t, "plug1", e.cmd("r1", 1, "power", `{"state":"ON"}`)); string(r.Output) != `{"payload":"ON","topic":"plant/relays/plug1/stat/RESULT"}` {
		t.Fatalf("relay output %s", r.Output)
	}
	if plug.Power() != "ON" {
		t.Fatalf("plug is %s after a confirmed ON", plug.Power())
	}

	// SIGKILL the plugin while it holds a command.
	pumpState := e.sup.Watch(t, protocol.Topics{}.DeviceState("pump1"))
	e.sup.Publish(t, "pump1", e.cmd("p2", 1, "pulse", `{"ms":60000}`))
	e.rec.WaitFor(t, map[string]string{"msg": "apply started", "id": "p2", "device": "pump1"})
	if err := syscall.Kill(readPID(t, e.dir), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if r := e.sup.Wait(t, "p2"); r.Status != protocol.StatusInDoubt || r.Code != protocol.CodeInDoubt {
		t.Fatalf("killed mid-command: %+v, want in_doubt", r)
	}
	waitOnline(t, pumpState, false)
	waitOnline(t, pumpState, true)
	e.mustApply(t, "pump1", e.cmd("p3", 2, "set", `{"value":3}`))
	if r := e.send(t, "pump1", e.cmd("p4", 1, "set", `{"value":4}`)); r.Code != protocol.CodeStaleToken {
		t.Fatalf("older token: %+v, want stale_token", r)
	}

	plugState := e.sup.Watch(t, protocol.Topics{}.DeviceState("plug1"))
	plug.SetOnline(false)
	waitOnline(t, plugState, false)
	if r := e.send(t, "plug1", e.cmd("r2", 2, "power", `{"state":"OFF"}`)); r.Code != protocol.CodeDeviceUnavailable {
		t.Fatalf("offline controller: %+v, want device_unavailable", r)
	}
	plug.SetOnline(true)
	waitOnline(t, plugState, true)
	e.mustApply(t, "plug1", e.cmd("r3", 2, "power", `{"state":"OFF"}`))
	if got := plug.Received(); fmt.Sprint(got) != "[ON OFF]" {
		t.Fatalf("plug received %q, want [ON OFF]", got)
	}
	checkLog(t, filepath.Join(e.dir, "apply.log"), "p1", "p3")
}

// e2e is a running agent with devices pump1 (plugin) and plug1 (relay),
// and a supervisor.
type e2e struct {
	dir    string
	signer *fence.Signer
	rec    *logtest.Recorder
	sup    *mqtttest.Supervisor
}

// startAgent starts the agent on broker; user and password (may be empty)
// are the agent's and its relay's broker credentials.
func startAgent(t *testing.T, broker, user, password string) *e2e {
	t.Helper()
	e := &e2e{dir: t.TempDir(), rec: logtest.New()}
	key, err := fence.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if e.signer, err = fence.NewSigner(key); err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(e.dir, "controller.pub")
	if err := fence.WritePublicKey(pub, e.signer.Public()); err != nil {
		t.Fatal(err)
	}
	cfg := agent.Config{
		Agent: agent.AgentConfig{ID: "gw1", DataDir: filepath.Join(e.dir, "data")},
		MQTT:  agent.MQTTConfig{Broker: broker, Username: user, Password: password},
		Trust: agent.TrustConfig{Keys: []string{pub}}, HTTP: agent.HTTPConfig{Listen: "off"},
		Devices: []agent.DeviceConfig{
			{ID: "pump1", Domain: "plant", Driver: "plugin", Settings: node(t, pluginSettings(e.dir))},
			{ID: "plug1", Domain: "plant", Driver: "mqttrelay", Timeout: 5 * time.Second,
				Settings: node(t, relaySettings("plant/relays/plug1", user, password))},
		},
	}
	e.sup = newSupervisor(t, broker, user)
	online := e.sup.Watch(t, "fencegate/v1/agents/gw1/status")
	a, err := agent.New(cfg.WithDefaults(), slog.New(e.rec))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	waitFor(t, online, func(p []byte) bool { return json.Valid(p) && string(p) != "" && contains(string(p), `"online":true`) })
	return e
}

func pluginSettings(dir string) string {
	return fmt.Sprintf(`{path: %q, ping_interval: 50ms, restart_backoff: 50ms, restart_backoff_max: 1s,
  config: {device: {log: %q, fence_file: %q}, pid_file: %q}}`,
		os.Args[0], filepath.Join(dir, "apply.log"), filepath.Join(dir, "fence"), filepath.Join(dir, "pid"))
}

func relaySettings(base, user, password string) string {
	return fmt.Sprintf(`{username: %q, password: %q, availability: {topic: %s},
  ops: [{name: power, topic: %s, payload: "{{.state}}", idempotent: true,
         confirm: {topic: %s, json_field: POWER, equals: "{{.state}}", timeout: 3s}}]}`,
		user, password, relaytest.LWTTopic(base), relaytest.CommandTopic(base), relaytest.ResultTopic(base))
}

func node(t *testing.T, doc string) yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		t.Fatalf("%v in %s", err, doc)
	}
	return *n.Content[0]
}

func (e *e2e) cmd(id string, seq uint64, op, args string) protocol.Command {
	tok, err := e.signer.Sign(fence.Token{Domain: "plant", Epoch: 1, Seq: seq, Holder: "sup-a", IssuedAt: 1, TTLms: 60000})
	if err != nil {
		panic(err)
	}
	return protocol.Command{ID: id, Token: tok.Raw, Op: op, Args: json.RawMessage(args)}
}

func (e *e2e) send(t *testing.T, device string, c protocol.Command) protocol.Result {
	t.Helper()
	return e.sup.Send(t, device, c)
}

func (e *e2e) mustApply(t *testing.T, device string, c protocol.Command) protocol.Result {
	t.Helper()
	r := e.send(t, device, c)
	if r.Status != protocol.StatusApplied {
		t.Fatalf("%s %s: %+v", device, c.ID, r)
	}
	return r
}

// waitState waits for device's retained state to say online (or not).
func (e *e2e) waitState(t *testing.T, device string, online bool) {
	t.Helper()
	waitOnline(t, e.sup.Watch(t, protocol.Topics{}.DeviceState(device)), online)
}

// waitOnline waits for a state message on ch saying online (or not).
func waitOnline(t *testing.T, ch <-chan []byte, online bool) {
	t.Helper()
	waitFor(t, ch, func(p []byte) bool {
		var s protocol.DeviceState
		return json.Unmarshal(p, &s) == nil && s.Online == online
	})
}

func waitFor(t *testing.T, ch <-chan []byte, ok func([]byte) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	var seen []string
	for {
		select {
		case p := <-ch:
			if ok(p) {
				return
			}
			seen = append(seen, string(p))
		case <-deadline:
			t.Fatalf("no matching message; saw %q", seen)
		}
	}
}

// newSupervisor connects supervisor "sup-a"; with agentUser set (a broker
// with passwords) it logs in as sup-a with deploy/mosquitto's example
// password.
func newSupervisor(t *testing.T, broker, agentUser string) *mqtttest.Supervisor {
	t.Helper()
	o := mqtttest.Options{ClientID: "sup-a", Timeout: 30 * time.Second}
	if agentUser != "" {
		o.Username, o.Password = "sup-a", "sup-a-example"
	}
	return mqtttest.NewSupervisor(t, broker, o)
}
