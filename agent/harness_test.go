package agent

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	_ "github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fence/fencetest"
	"github.com/fencegate/fencegate/internal/mqtttest"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// harness runs an agent in-process against a broker the test owns, so the
// agent can be stopped and started again while the broker (and supervisors
// connected to it) stay.
type harness struct {
	t      testing.TB
	dir    string
	signer *fence.Signer
	broker *mqtt.Embedded
	cfg    Config
	agent  *Agent
	cancel context.CancelFunc
	done   chan error
	sup    *mqtttest.Supervisor
	log    *slog.Logger // the agent's logger; nil discards
}

// newHarness starts a broker and an agent with the sim devices named, each
// in the domain "plant", logging applies to <dir>/<device>.log.
func newHarness(t testing.TB, deviceIDs ...string) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), signer: fencetest.MustSigner(t, 1)}
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.broker = b
	t.Cleanup(func() { h.broker.Close() })
	pub := fencetest.WritePublicKey(t, h.dir, h.signer)
	h.cfg = Config{Agent: AgentConfig{ID: "gw1", DataDir: filepath.Join(h.dir, "data")},
		MQTT: MQTTConfig{Broker: b.URL()}, Trust: TrustConfig{Keys: []string{pub}}, HTTP: HTTPConfig{Listen: "127.0.0.1:0"}}
	for _, id := range deviceIDs {
		h.cfg.Devices = append(h.cfg.Devices, DeviceConfig{ID: id, Domain: "plant", Driver: "sim",
			Settings: simSettings(t, fmt.Sprintf("log: %s", filepath.Join(h.dir, id+".log")))})
	}
	h.sup = mqtttest.NewSupervisor(t, b.URL(), mqtttest.Options{ClientID: "sup", ReplyTopics: []string{"fencegate/v1/replies/#"}})
	return h
}

func simSettings(t testing.TB, doc string) (n yaml.Node) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		t.Fatal(err)
	}
	return *n.Content[0]
}

// start runs the agent and waits until it has announced itself online
// (its subscriptions are in place by then: the broker handles a client's
// packets in order).
func (h *harness) start() {
	h.t.Helper()
	online := h.sup.WatchOnline("gw1")
	log := h.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a, err := New(h.cfg.WithDefaults(), log)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.agent, h.cancel, h.done = a, cancel, make(chan error, 1)
	go func() { h.done <- a.Run(ctx) }()
	select {
	case <-online:
	case <-time.After(10 * time.Second):
		h.t.Fatal("agent did not come online")
	}
	h.t.Cleanup(func() { h.stop() })
}

// stop stops the agent gracefully and returns Run's error.
func (h *harness) stop() error {
	if h.cancel == nil {
		return nil
	}
	h.cancel()
	h.cancel = nil
	return <-h.done
}

func (h *harness) token(seq uint64, holder string) string {
	return h.tokenIn("plant", seq, holder)
}

func (h *harness) tokenIn(domain string, seq uint64, holder string) string {
	tok, err := h.signer.Sign(fence.Token{Domain: domain, Epoch: 1, Seq: seq, Holder: holder, IssuedAt: int64(seq), TTLms: 60000})
	if err != nil {
		h.t.Fatal(err)
	}
	return tok.Raw
}
