package browsertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/agent"
	_ "github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease/server"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/supervisor"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// world is a real installation: embedded broker, controller (bbolt store,
// HTTP API), agent with one sim device pump1 in domain plant (HTTP API).
type world struct {
	t                 *testing.T
	dir               string
	broker            *mqtt.Embedded
	signer            *fence.Signer
	agentURL, ctrlURL string
}

// inDoubtSeed is a command journaled as accepted and never completed
// before the agent starts, so the agent lists it in doubt.
type inDoubtSeed struct{ id, args string }

func newWorld(t *testing.T, seeds ...inDoubtSeed) *world {
	t.Helper()
	w := &world{t: t, dir: t.TempDir()}
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.broker = b
	t.Cleanup(func() { b.Close() })
	key, pub := filepath.Join(w.dir, "controller.key"), filepath.Join(w.dir, "controller.pub")
	priv, err := fence.WriteKeyFiles(key, pub, true)
	if err != nil {
		t.Fatal(err)
	}
	if w.signer, err = fence.NewSigner(priv); err != nil {
		t.Fatal(err)
	}
	w.seed(seeds)
	w.startController(key)
	w.startAgent(pub)
	return w
}

// runUntilCleanup runs f until the test ends.
func runUntilCleanup(t *testing.T, what string, f func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop", what)
		}
	})
}

func (w *world) startController(key string) {
	cfg := server.Config{DataDir: filepath.Join(w.dir, "controller"), Key: key, HTTP: "127.0.0.1:0",
		MQTT: server.MQTTConfig{Config: mqtt.Config{Broker: w.broker.URL()}}}
	c, err := server.New(cfg, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	w.ctrlURL = "http://" + c.HTTPAddr()
	runUntilCleanup(w.t, "controller", c.Run)
	waitFor(w.t, "controller ready", func() bool { return c.Ready() == nil })
}

func (w *world) startAgent(pub string) {
	var node yaml.Node
	if err := yaml.Unmarshal([]byte("log: "+filepath.Join(w.dir, "pump1.log")), &node); err != nil {
		w.t.Fatal(err)
	}
	cfg := agent.Config{Agent: agent.AgentConfig{ID: "gw1", DataDir: filepath.Join(w.dir, "agent")},
		MQTT: agent.MQTTConfig{Broker: w.broker.URL()}, Trust: agent.TrustConfig{Keys: []string{pub}},
		HTTP:    agent.HTTPConfig{Listen: "127.0.0.1:0"},
		Devices: []agent.DeviceConfig{{ID: "pump1", Domain: "plant", Driver: "sim", Settings: *node.Content[0]}}}
	a, err := agent.New(cfg.WithDefaults(), nil)
	if err != nil {
		w.t.Fatal(err)
	}
	w.agentURL = "http://" + a.HTTPAddr()
	runUntilCleanup(w.t, "agent", a.Run)
	waitFor(w.t, "agent connected", func() bool { return a.Status().Broker.Connected })
}

// seed journals the seeds in the agent's store as accepted (epoch 1, below
// every token the controller mints) and leaves them without a result.
func (w *world) seed(seeds []inDoubtSeed) {
	if len(seeds) == 0 {
		return
	}
	dir := filepath.Join(w.dir, "agent")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		w.t.Fatal(err)
	}
	s, err := persist.Open(filepath.Join(dir, "fence.db"), persist.Options{})
	if err != nil {
		w.t.Fatal(err)
	}
	tok, err := w.signer.Sign(fence.Token{Domain: "plant", Epoch: 1, Seq: 1, Holder: "old-holder", IssuedAt: 1, TTLms: 1000})
	if err != nil {
		w.t.Fatal(err)
	}
	for _, sd := range seeds {
		if _, err := s.Accept(context.Background(), persist.Command{Device: "pump1", ID: sd.id, Token: tok, Op: "set", Args: []byte(sd.args)}); err != nil {
			w.t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		w.t.Fatal(err)
	}
}

// supervisor dials a supervisor SDK client named holder.
func (w *world) supervisor(holder string) *supervisor.Client {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := supervisor.Dial(ctx, supervisor.Config{MQTT: mqtt.Config{Broker: w.broker.URL()}, Holder: holder})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(c.Close)
	return c
}

// acquireAndSet takes the plant lease for c and has it set pump1 to v; it
// returns the lease and the id of the applied command.
func (w *world) acquireAndSet(c *supervisor.Client, v int) (*supervisor.Lease, string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := c.Acquire(ctx, "plant", supervisor.AcquireOptions{TTL: 30 * time.Second, Wait: 10 * time.Second})
	if err != nil {
		w.t.Fatal(err)
	}
	r, err := l.Send(ctx, "pump1", "set", map[string]any{"value": v})
	if err != nil {
		w.t.Fatalf("set by %s: %+v %v", c.Holder(), r, err)
	}
	return l, r.ID
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// epochDate is how both pages show an epoch (Date.toISOString).
func epochDate(epoch uint64) string {
	return time.UnixMilli(int64(epoch)).UTC().Format("2006-01-02T15:04:05.000Z")
}

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }
