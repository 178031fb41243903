package agent

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"gopkg.in/yaml.v3"

	_ "github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/fence"
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
	sup    *supervisor
}

func testSigner(t testing.TB, seedByte byte) *fence.Signer {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = seedByte + byte(i)
	}
	s, err := fence.NewSigner(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newHarness starts a broker and an agent with the sim devices named, each
// in the domain "plant", logging applies to <dir>/<device>.log.
func newHarness(t testing.TB, deviceIDs ...string) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), signer: testSigner(t, 1)}
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.broker = b
	t.Cleanup(func() { h.broker.Close() })
	pub := filepath.Join(h.dir, "controller.pub")
	if err := fence.WritePublicKey(pub, h.signer.Public()); err != nil {
		t.Fatal(err)
	}
	h.cfg = Config{Agent: AgentConfig{ID: "gw1", DataDir: filepath.Join(h.dir, "data")},
		MQTT: MQTTConfig{Broker: b.URL()}, Trust: TrustConfig{Keys: []string{pub}}, HTTP: HTTPConfig{Listen: "127.0.0.1:0"}}
	for _, id := range deviceIDs {
		h.cfg.Devices = append(h.cfg.Devices, DeviceConfig{ID: id, Domain: "plant", Driver: "sim",
			Settings: simSettings(t, fmt.Sprintf("log: %s", filepath.Join(h.dir, id+".log")))})
	}
	h.sup = newSupervisor(t, b.URL(), "sup")
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
	online := h.sup.watchStatus("gw1")
	a, err := New(h.cfg.WithDefaults(), slog.New(slog.DiscardHandler))
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

// supervisor is a real MQTT client that sends commands and collects results.
type supervisor struct {
	t      testing.TB
	client paho.Client
	mu     sync.Mutex // guards results and status
	result map[string]chan mqtt.Result
	status map[string]chan struct{}
}

func newSupervisor(t testing.TB, broker, id string) *supervisor {
	t.Helper()
	s := &supervisor{t: t, result: map[string]chan mqtt.Result{}, status: map[string]chan struct{}{}}
	topics := mqtt.Topics{}
	opts, err := mqtt.Config{Broker: broker, ClientID: id}.ClientOptions(func(c paho.Client) {
		c.Subscribe(topics.DeviceResults("+"), 1, s.onResult)
		c.Subscribe("replies/#", 1, s.onResult)
		c.Subscribe(topics.AgentStatus("+"), 1, s.onStatus)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.client = paho.NewClient(opts)
	if err := mqtt.Wait(s.client.Connect(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.client.Disconnect(100) })
	return s
}

func (s *supervisor) chanFor(id string) chan mqtt.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.result[id]
	if !ok {
		ch = make(chan mqtt.Result, 16)
		s.result[id] = ch
	}
	return ch
}

func (s *supervisor) onResult(_ paho.Client, m paho.Message) {
	var r mqtt.Result
	if err := json.Unmarshal(m.Payload(), &r); err != nil {
		s.t.Errorf("undecodable result %q: %v", m.Payload(), err)
		return
	}
	s.chanFor(r.ID) <- r
}

func (s *supervisor) onStatus(_ paho.Client, m paho.Message) {
	var st mqtt.AgentStatus
	if json.Unmarshal(m.Payload(), &st) != nil || !st.Online {
		return
	}
	agent, _, _ := mqttCut(m.Topic())
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.status[agent]; ok {
		close(ch)
		delete(s.status, agent)
	}
}

// watchStatus returns a channel closed when agent next reports online.
func (s *supervisor) watchStatus(agent string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.status[agent] = ch
	return ch
}

// publishRaw sends payload to device's commands topic.
func (s *supervisor) publishRaw(device string, payload []byte) {
	s.t.Helper()
	if err := mqtt.Wait(s.client.Publish(mqtt.Topics{}.DeviceCommands(device), 1, false, payload), 10*time.Second); err != nil {
		s.t.Fatal(err)
	}
}

// send publishes cmd for device and waits for the result with cmd's id.
func (s *supervisor) send(device string, cmd mqtt.Command) mqtt.Result {
	s.t.Helper()
	b, err := json.Marshal(cmd)
	if err != nil {
		s.t.Fatal(err)
	}
	ch := s.chanFor(cmd.ID)
	s.publishRaw(device, b)
	return s.wait(cmd.ID, ch)
}

func (s *supervisor) wait(id string, ch chan mqtt.Result) mqtt.Result {
	s.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(15 * time.Second):
		s.t.Fatalf("no result for %q", id)
		return mqtt.Result{}
	}
}

// mqttCut returns the agent id of an agent status topic.
func mqttCut(topic string) (agent, rest string, ok bool) {
	const pre = mqtt.DefaultPrefix + "/agents/"
	if len(topic) <= len(pre) {
		return "", "", false
	}
	agent = topic[len(pre):]
	for i := range agent {
		if agent[i] == '/' {
			return agent[:i], agent[i+1:], true
		}
	}
	return agent, "", true
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
