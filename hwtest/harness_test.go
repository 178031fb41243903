package hwtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/agent"
	_ "github.com/fencegate/fencegate/devices/frame"
	_ "github.com/fencegate/fencegate/devices/line"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fence/fencetest"
	"github.com/fencegate/fencegate/internal/mqtttest"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// Device ids and domains of the suite's agent.
const (
	frameDev, frameDomain = "fw", "plant"
	lineDev, lineDomain   = "ln", "bench"
	applyTimeout          = 2 * time.Second
)

// lineOps are the line device's ops for the reference line command set.
const lineOps = `
ops:
  - name: set
    request: "SET {{.ch}} {{.value}}"
    ok: "^OK$"
    error: "^ERR (?P<code>-?\\d+) (?P<message>.*)$"
    args: [{name: ch, type: int, min: 1, max: 8}, {name: value}]
  - name: get
    request: "GET? {{.ch}}"
    ok: "^VAL (?P<ch>\\d+) (?P<value>\\S+)$"
    error: "^ERR (?P<code>-?\\d+) (?P<message>.*)$"
    idempotent: true
    args: [{name: ch, type: int, min: 1, max: 8}]
`

// target is one device under test: a simulator, or a real port (sim nil).
type target struct {
	dev, domain, path string
	sim               *Sim
}

// needSim skips a scenario that needs fault injection on a real target.
func (tg target) needSim(t *testing.T) *Sim {
	t.Helper()
	if tg.sim == nil {
		t.Skipf("%s is real hardware: this scenario needs the simulator's fault injection", tg.dev)
	}
	return tg.sim
}

// suite runs one agent in-process, with a frame and a line device, against
// an embedded broker; a supervisor client talks to it over MQTT.
type suite struct {
	t      *testing.T
	dir    string
	signer *fence.Signer
	broker *mqtt.Embedded
	cfg    agent.Config
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
	sup    *mqtttest.Supervisor
	fw, ln target
	mu     sync.Mutex // guards seq
	seq    map[string]uint64
}

func newSuite(t *testing.T) *suite {
	t.Helper()
	s := &suite{t: t, dir: t.TempDir(), logs: &syncBuffer{}, seq: map[string]uint64{}}
	s.fw = s.target(frameDev, frameDomain, "frame", *framePort)
	s.ln = s.target(lineDev, lineDomain, "line", *linePort)
	s.signer = fencetest.MustSigner(t, 7)
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.broker = b
	t.Cleanup(func() { b.Close() })
	s.cfg = s.agentConfig()
	s.sup = mqtttest.NewSupervisor(t, b.URL(), mqtttest.Options{ClientID: "hwtest-sup", Timeout: 20 * time.Second})
	return s
}

// target starts a simulator for dev unless port names a real one.
func (s *suite) target(dev, domain, protocol, port string) target {
	if port != "" {
		return target{dev: dev, domain: domain, path: port}
	}
	if simBin == "" {
		s.t.Skipf("simulated firmware unavailable: %v", simErr)
	}
	sim, err := StartSim(simBin, protocol, s.dir, dev)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { sim.Close() })
	return target{dev: dev, domain: domain, path: sim.Link, sim: sim}
}

func (s *suite) agentConfig() agent.Config {
	pub := fencetest.WritePublicKey(s.t, s.dir, s.signer)
	port := fmt.Sprintf("port: {path: %%s, baud: %d, read_timeout: 20ms, reopen_min: 20ms, reopen_max: 200ms}\n", *baud)
	return agent.Config{
		Agent: agent.AgentConfig{ID: "hwtest", DataDir: filepath.Join(s.dir, "data")},
		MQTT:  agent.MQTTConfig{Broker: s.broker.URL()}, Trust: agent.TrustConfig{Keys: []string{pub}},
		HTTP: agent.HTTPConfig{Listen: "off"},
		Devices: []agent.DeviceConfig{
			{ID: frameDev, Domain: frameDomain, Driver: "frame", Timeout: applyTimeout, Settings: node(s.t, fmt.Sprintf(port, s.fw.path))},
			{ID: lineDev, Domain: lineDomain, Driver: "line", Timeout: applyTimeout, Settings: node(s.t, fmt.Sprintf(port, s.ln.path)+lineOps)},
		},
	}.WithDefaults()
}

func node(t *testing.T, doc string) yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		t.Fatalf("%v in\n%s", err, doc)
	}
	return *n.Content[0]
}

// start runs the agent and waits until it announces itself online.
func (s *suite) start() {
	s.t.Helper()
	online := s.sup.WatchOnline("hwtest")
	a, err := agent.New(s.cfg, slog.New(slog.NewTextHandler(s.logs, nil)))
	if err != nil {
		s.t.Fatalf("agent.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() { s.done <- a.Run(ctx) }()
	select {
	case <-online:
	case <-time.After(15 * time.Second):
		s.t.Fatal("agent did not come online")
	}
}

// stop stops the agent and checks Run's result.
func (s *suite) stop() {
	s.t.Helper()
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	if err := <-s.done; err != nil {
		s.t.Errorf("agent Run: %v", err)
	}
}

// token signs a token of domain at seq (epoch 1, holder "sup").
func (s *suite) token(t *testing.T, domain string, seq uint64) string {
	tok, err := s.signer.Sign(fence.Token{Domain: domain, Epoch: 1, Seq: seq, Holder: "sup", IssuedAt: time.Now().UnixMilli(), TTLms: 60000})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Raw
}

// next returns a seq above every one used so far in domain.
func (s *suite) next(domain string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq[domain] += 10
	return s.seq[domain] + 100
}

// send commands dev with a fresh token and returns the result.
func (s *suite) send(t *testing.T, tg target, id, op, args string) protocol.Result {
	t.Helper()
	return s.sendSeq(t, tg, id, op, args, s.next(tg.domain))
}

func (s *suite) sendSeq(t *testing.T, tg target, id, op, args string, seq uint64) protocol.Result {
	t.Helper()
	c := protocol.Command{ID: id, Token: s.token(t, tg.domain, seq), Op: op}
	if args != "" {
		c.Args = json.RawMessage(args)
	}
	return s.sup.Send(t, tg.dev, c)
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
