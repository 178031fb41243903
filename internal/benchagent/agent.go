package benchagent

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/agent"
	_ "github.com/fencegate/fencegate/devices/sim" // the driver the bench devices use
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/benchload"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// AgentID is the bench agent's id.
const AgentID = "bench"

// Agent is an agent running in this process with n sim devices (no
// latency), device i named benchload.DeviceID(i) in its own fencing domain
// benchload.TokenDomain(i), connected to a broker given by URL.
type Agent struct {
	devices int
	cancel  context.CancelFunc
	done    chan error
	next    []int // per device: index of the next unused pool token
	runs    int   // Commands calls so far, for unique command ids
}

// StartAgent writes pub to dir, starts an agent with devices devices on the
// broker at brokerURL, its store under dir, and returns once the agent has
// announced itself online (its command subscriptions are in place by then:
// the broker handles a client's packets in order).
func StartAgent(dir, brokerURL string, devices int, pub ed25519.PublicKey) (*Agent, error) {
	return StartAgentWith(dir, brokerURL, devices, pub, Options{})
}

// Options change the bench agent's configuration; zero fields keep the
// agent's defaults.
type Options struct {
	Journal agent.JournalConfig // journal retention
	Queue   int                 // limits.queue
}

// StartAgentWith is StartAgent with opts applied.
func StartAgentWith(dir, brokerURL string, devices int, pub ed25519.PublicKey, opts Options) (*Agent, error) {
	if devices < 1 {
		return nil, fmt.Errorf("%w: devices %d", ErrInvalid, devices)
	}
	cfg, err := agentConfig(dir, brokerURL, devices, pub)
	if err != nil {
		return nil, err
	}
	cfg.Journal, cfg.Limits.Queue = opts.Journal, opts.Queue
	online, stopWatch, err := watchOnline(brokerURL)
	if err != nil {
		return nil, err
	}
	defer stopWatch()
	ag, err := agent.New(cfg.WithDefaults(), slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, fmt.Errorf("bench agent: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Agent{devices: devices, cancel: cancel, done: make(chan error, 1), next: make([]int, devices)}
	go func() { a.done <- ag.Run(ctx) }()
	select {
	case <-online:
		return a, nil
	case err := <-a.done:
		cancel()
		return nil, fmt.Errorf("bench agent stopped at start: %w", err)
	case <-time.After(5 * time.Minute):
		return nil, errors.Join(fmt.Errorf("%w: bench agent not online after 5 minutes", ErrNoAnswer), a.Stop())
	}
}

func agentConfig(dir, brokerURL string, devices int, pub ed25519.PublicKey) (agent.Config, error) {
	keyPath := filepath.Join(dir, "bench.pub")
	if err := fence.WritePublicKey(keyPath, pub); err != nil {
		return agent.Config{}, err
	}
	var settings yaml.Node
	if err := yaml.Unmarshal([]byte("latency: 0s"), &settings); err != nil {
		return agent.Config{}, err
	}
	cfg := agent.Config{Agent: agent.AgentConfig{ID: AgentID, DataDir: filepath.Join(dir, "data")},
		MQTT: agent.MQTTConfig{Broker: brokerURL}, Trust: agent.TrustConfig{Keys: []string{keyPath}},
		HTTP: agent.HTTPConfig{Listen: "off"}}
	for i := range devices {
		cfg.Devices = append(cfg.Devices, agent.DeviceConfig{ID: benchload.DeviceID(i), Domain: benchload.TokenDomain(i),
			Driver: "sim", Settings: *settings.Content[0]})
	}
	return cfg, nil
}

// watchOnline returns a channel closed when the bench agent's status says
// online, and a function that disconnects the watcher.
func watchOnline(brokerURL string) (<-chan struct{}, func(), error) {
	online := make(chan struct{})
	closed := false
	opts, err := mqtt.Config{Broker: brokerURL, ClientID: "bench-watch"}.ClientOptions(nil)
	if err != nil {
		return nil, nil, err
	}
	opts.SetOrderMatters(true)
	c := paho.NewClient(opts)
	if err := mqtt.Wait(c.Connect(), 10*time.Second); err != nil {
		return nil, nil, fmt.Errorf("status watcher: %w", err)
	}
	onStatus := func(_ paho.Client, m paho.Message) {
		var st protocol.AgentStatus
		if json.Unmarshal(m.Payload(), &st) == nil && st.Online && !closed {
			closed = true
			close(online)
		}
	}
	if err := mqtt.Wait(c.Subscribe(protocol.Topics{}.AgentStatus(AgentID), 1, onStatus), 10*time.Second); err != nil {
		c.Disconnect(0)
		return nil, nil, fmt.Errorf("status watcher: %w", err)
	}
	return online, func() { c.Disconnect(100) }, nil
}

// Stop stops the agent gracefully and returns Run's error.
func (a *Agent) Stop() error {
	a.cancel()
	return <-a.done
}

// Devices returns the number of devices.
func (a *Agent) Devices() int { return a.devices }
