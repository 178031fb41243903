package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/agent"
	_ "github.com/fencegate/fencegate/devices/mqttrelay"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// base is the device's topic base behind the agent.
const base = "plant/relays/fw1"

// TestDeviceBehindAgentFencesAgree runs the same scenario with the agent
// in front: the device sits behind the agent's mqttrelay driver, whose
// payload template hands it the token ({"state","token"}). A's late write is
// rejected stale_token by the agent; published straight to the device, as a
// broker without ACLs would let anyone, it is rejected stale_token by the
// device too; the two fences stay equal (B's lease) through a restart of
// the device; forged and foreign tokens fail at both.
func TestDeviceBehindAgentFencesAgree(t *testing.T) {
	e := newEnv(t)
	dev := e.startDevice(t, base)
	e.startAgent(t)
	supA, supB := e.dial(t, "sup-a"), e.dial(t, "sup-b")

	tokA := rawAcquire(t, supA, domain, time.Second)
	if r := send(t, supA, tokA.Raw, relayArgs("ON", tokA.Raw)); r.Status != protocol.StatusApplied {
		t.Fatalf("A's write through the agent: %+v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	leaseB, err := supB.Acquire(ctx, domain, supervisor.AcquireOptions{TTL: time.Minute, Wait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tokB := leaseB.Fence()
	if err := leaseB.WaitHandover(ctx, device); err != nil { // the agent's fence
		t.Fatalf("the agent's fence never reached B's grant: %v", err)
	}
	e.waitDeviceFence(t, tokB) // the device's own, from the same retained grant

	wantResult(t, "A's late write at the agent", send(t, supA, tokA.Raw, relayArgs("OFF", tokA.Raw)), protocol.CodeStaleToken, tokB)
	e.wantDirectRejection(t, tokA.Raw, "stale_token")

	dev.kill()
	e.startDevice(t, base)
	e.waitDeviceFence(t, tokB)
	e.wantDirectRejection(t, tokA.Raw, "stale_token")

	if r := send(t, supB, tokB.Raw, relayArgs("OFF", tokB.Raw)); r.Status != protocol.StatusApplied {
		t.Fatalf("B's write through the agent: %+v", r)
	}
	e.rejectsBadTokensBoth(t, supA, tokB.Raw)
	e.wantApplied(t, tokA, tokB)
	e.waitDeviceFence(t, tokB)
}

// relayArgs are a command's args for the relayed device: the state, and the
// token again, for the driver's payload template.
func relayArgs(state, token string) map[string]any {
	return map[string]any{"state": state, "token": token}
}

// startAgent runs the agent with fw1 behind the mqttrelay driver.
func (e *env) startAgent(t *testing.T) {
	t.Helper()
	settings := fmt.Sprintf(`{availability: {topic: %s/tele/LWT},
  ops: [{name: power, topic: %s/cmnd/POWER, payload: '{"state":"{{.state}}","token":"{{.token}}"}', idempotent: true,
         confirm: {topic: %s/stat/RESULT, json_field: POWER, equals: "{{.state}}", timeout: 5s}}]}`, base, base, base)
	var node yaml.Node
	if err := yaml.Unmarshal([]byte(settings), &node); err != nil {
		t.Fatal(err)
	}
	cfg := agent.Config{
		Agent: agent.AgentConfig{ID: "gw1", DataDir: filepath.Join(e.dir, "agent")},
		MQTT:  agent.MQTTConfig{Broker: e.broker}, Trust: agent.TrustConfig{Keys: []string{e.pubKey}},
		HTTP:    agent.HTTPConfig{Listen: "off"},
		Devices: []agent.DeviceConfig{{ID: device, Domain: domain, Driver: "mqttrelay", Timeout: 10 * time.Second, Settings: *node.Content[0]}},
	}
	online := e.watcher.WatchOnline("gw1")
	a, err := agent.New(cfg.WithDefaults(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	select {
	case <-online:
	case <-time.After(wait):
		t.Fatal("the agent never came online")
	}
	e.watcher.WaitState(t, device, true)
}

// deviceFence is the device's retained <base>/stat/FENCE.
type deviceFence struct {
	Domain   string       `json:"domain"`
	Fence    *fence.Fence `json:"fence"`
	IssuedAt int64        `json:"issued_at"`
}

// waitDeviceFence waits until the device's own retained fence is tok's
// lease: the same position, holder and issue time.
func (e *env) waitDeviceFence(t *testing.T, tok fence.Token) {
	t.Helper()
	waitFor(t, e.watcher.Watch(t, base+"/stat/FENCE"), "the device's fence at "+tok.String(), func(b []byte) bool {
		var f deviceFence
		return json.Unmarshal(b, &f) == nil && f.Domain == domain && f.Fence != nil && *f.Fence == tok.Fence() &&
			f.IssuedAt == tok.IssuedAt
	})
}

// publishDirect publishes a relay command straight to the device's command
// topic, around the agent, and returns the device's next answer there.
func (e *env) publishDirect(t *testing.T, state, token string) map[string]any {
	t.Helper()
	results := e.watcher.Watch(t, base+"/stat/RESULT")
	payload := fmt.Sprintf(`{"state":%q,"token":%q}`, state, token)
	if err := mqtt.Wait(e.watcher.Client().Publish(base+"/cmnd/POWER", 1, false, payload), wait); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	waitFor(t, results, "the device's answer", func(b []byte) bool { return json.Unmarshal(b, &got) == nil })
	return got
}

// wantDirectRejection: a command sent around the agent is refused by the
// device itself with code.
func (e *env) wantDirectRejection(t *testing.T, token, code string) map[string]any {
	t.Helper()
	got := e.publishDirect(t, "OFF", token)
	if got["Error"] != code || got["POWER"] != nil {
		t.Fatalf("direct command: the device answered %v, want Error %s", got, code)
	}
	return got
}

// rejectsBadTokensBoth: forged, tampered and foreign-domain tokens fail at
// the agent and, sent around it, at the device.
func (e *env) rejectsBadTokensBoth(t *testing.T, c *supervisor.Client, good string) {
	t.Helper()
	foreign := rawAcquire(t, e.dial(t, "sup-c"), "other", time.Minute)
	tests := []struct {
		name, token string
		agent       protocol.Code
		device      string
	}{
		{"forged", forged(t), protocol.CodeInvalidToken, "invalid_token"},
		{"tampered", tampered(good), protocol.CodeInvalidToken, "invalid_token"},
		{"foreign domain", foreign.Raw, protocol.CodeWrongDomain, "wrong_domain"},
	}
	for _, tc := range tests {
		if r := send(t, c, tc.token, relayArgs("ON", tc.token)); r.Code != tc.agent {
			t.Errorf("%s token at the agent: %+v, want %s", tc.name, r, tc.agent)
		}
		if got := e.publishDirect(t, "ON", tc.token); got["Error"] != tc.device {
			t.Errorf("%s token at the device: %v, want %s", tc.name, got, tc.device)
		}
	}
}
