package securitytest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/agent"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// fencedPath runs acquire → command → release → another holder's
// acquire and command → the first holder's stale command, all over
// broker with each party's client certificate.
func fencedPath(t *testing.T, broker string, p *pki) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tlsA := p.client("line1-sup")
	supA := dialSup(t, broker, "line1-sup-a", tlsA)
	supB := dialSup(t, broker, "line1-sup-b", tlsA)
	la, err := supA.Acquire(ctx, "line1-press", supervisor.AcquireOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("acquire over mTLS: %v", err)
	}
	wantResult(t, "first holder's command", must(la.Send(ctx, "press1", "set", map[string]int{"value": 1})), protocol.StatusApplied, protocol.CodeOK)
	old := la.Token()
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := supB.Acquire(ctx, "line1-press", supervisor.AcquireOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Release(ctx)
	wantResult(t, "second holder's command", must(lb.Send(ctx, "press1", "set", map[string]int{"value": 2})), protocol.StatusApplied, protocol.CodeOK)
	wantResult(t, "stale command", must(supA.SendToken(ctx, old, "press1", "set", map[string]int{"value": 3})),
		protocol.StatusRejected, protocol.CodeStaleToken)
}

// must is r, or a result naming err when no answer came.
func must(r protocol.Result, err error) protocol.Result {
	if err != nil && r.Status == "" {
		return protocol.Result{Status: "error", Message: err.Error()}
	}
	return r
}

func wantResult(t *testing.T, what string, r protocol.Result, status protocol.Status, code protocol.Code) {
	t.Helper()
	if r.Status != status || r.Code != code {
		t.Fatalf("%s: %s %s (%s), want %s %s", what, r.Status, r.Code, r.Message, status, code)
	}
}

// TestFencedPathOverMTLSEmbedded: the agent's embedded broker serves TLS
// and admits clients by certificate only; controller and supervisors
// connect with theirs; a client without one is refused.
func TestFencedPathOverMTLSEmbedded(t *testing.T) {
	p := newPKI(t)
	key, pub := keyPair(t)
	cfg := agentConfig(t, pub)
	cfg.MQTT = agent.MQTTConfig{Listen: "127.0.0.1:" + freePort(t),
		ServerTLS: mqtt.ServerTLS{Cert: p.broker.Cert, Key: p.broker.Key, ClientCA: p.ca.CAFile}}
	a := runAgent(t, cfg)
	broker := a.BrokerURL()
	runCtl(t, broker, key, p.client("controller"))
	fencedPath(t, broker, p)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := supervisor.Dial(ctx, supervisor.Config{MQTT: mqtt.Config{Broker: broker, ClientID: "nocert", TLS: mqtt.TLS{CA: p.ca.CAFile}}})
	if err == nil {
		t.Fatal("a client without a certificate connected to the embedded broker")
	}
}

// TestFencedPathOverMTLSMosquitto: the same over a real Mosquitto TLS
// listener (deploy/mosquitto/tls.conf, certificate identities as user
// names under deploy/mosquitto/acl-teams).
func TestFencedPathOverMTLSMosquitto(t *testing.T) {
	p := newPKI(t)
	broker := startMosquittoTLS(t, p)
	key, pub := keyPair(t)
	cfg := agentConfig(t, pub)
	cfg.MQTT = agent.MQTTConfig{Broker: broker, TLS: p.client("agent-gw1")}
	runAgent(t, cfg)
	runCtl(t, broker, key, p.client("controller"))
	fencedPath(t, broker, p)
}

// TestMosquittoTeamACL: under deploy/mosquitto/acl-teams, team line2's
// acquire of line1's domain never reaches the controller (no answer; the
// domain stays free), while its own domain works and line1 then gets
// line1-press.
func TestMosquittoTeamACL(t *testing.T) {
	p := newPKI(t)
	broker := startMosquittoTLS(t, p)
	key, pub := keyPair(t)
	cfg := agentConfig(t, pub)
	cfg.MQTT = agent.MQTTConfig{Broker: broker, TLS: p.client("agent-gw1")}
	runAgent(t, cfg)
	runCtl(t, broker, key, p.client("controller"))
	line1 := dialSup(t, broker, "line1-sup-a", p.client("line1-sup"))
	line2 := dialSup(t, broker, "line2-sup-a", p.client("line2-sup"))

	short, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := line2.LeaseRequest(short, "line1-press", protocol.OpAcquire,
		protocol.Request{RequestID: "steal-1", Holder: "line2-sup-a", TTLms: 60000})
	if !errors.Is(err, supervisor.ErrNoAnswer) {
		t.Fatalf("line2's acquire of line1-press: %+v, %v; want no answer (the broker drops it)", resp, err)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	own, err := line2.Acquire(ctx, "line2-press", supervisor.AcquireOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("line2's own domain: %v", err)
	}
	defer own.Release(ctx)
	// line2's later request was answered, so its earlier one would have
	// reached the controller by now had the broker passed it.
	got, err := line1.LeaseRequest(ctx, "line1-press", protocol.OpGet, protocol.Request{})
	if err != nil || got.Code != protocol.CodeReleased {
		t.Fatalf("line1-press after line2's attempt: %+v, %v; want free (released)", got, err)
	}
	l1, err := line1.Acquire(ctx, "line1-press", supervisor.AcquireOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("line1's acquire: %v", err)
	}
	defer l1.Release(ctx)
	wantResult(t, "line1's command", must(l1.Send(ctx, "press1", "set", map[string]int{"value": 1})), protocol.StatusApplied, protocol.CodeOK)
}
