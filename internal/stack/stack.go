// Package stack runs a whole fencegate installation in one process — an
// embedded broker, a lease controller and an agent with simulated devices —
// for the demo, the SDK and CLI tests. It runs the same libraries the
// commands run (lease/server, agent); it adds no behaviour of its own.
package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/agent"
	_ "github.com/fencegate/fencegate/devices/sim" // the devices of the stack
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease/server"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// Options describe the stack. Dir is required.
type Options struct {
	Dir        string   // data, keys and device logs go here
	BrokerAddr string   // embedded broker address; default "127.0.0.1:0"
	Domain     string   // fencing domain of every device; default "plant"
	Devices    []string // sim device ids; default pump1, valve1
	Latency    time.Duration
	Log        *slog.Logger // default: discard
}

// Stack is a running installation. Close stops it.
type Stack struct {
	opts   Options
	Broker *mqtt.Embedded
	Signer *fence.Signer
	PubKey string // path of the controller's public key file
	ctrl   *running
	agent  *running
}

// running is a component's Run in its own goroutine.
type running struct {
	cancel context.CancelFunc
	rc     chan error // Run's result
}

// run calls f in a goroutine with a context that stop cancels.
func run(f func(context.Context) error) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, rc: make(chan error, 1)}
	go func() { r.rc <- f(ctx) }()
	return r
}

// stop cancels the Run and returns its result; nil r is stopped already.
func (r *running) stop() error {
	if r == nil {
		return nil
	}
	r.cancel()
	return <-r.rc
}

// Start starts broker, controller and agent and returns once the agent
// has announced itself online and the controller's API is subscribed.
func Start(ctx context.Context, o Options) (s *Stack, err error) {
	o = o.withDefaults()
	s = &Stack{opts: o}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.Broker, err = mqtt.StartEmbedded(o.BrokerAddr, nil); err != nil {
		return nil, err
	}
	if err = s.startController(ctx); err != nil {
		return nil, err
	}
	if err = s.startAgent(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (o Options) withDefaults() Options {
	if o.BrokerAddr == "" {
		o.BrokerAddr = "127.0.0.1:0"
	}
	if o.Domain == "" {
		o.Domain = "plant"
	}
	if len(o.Devices) == 0 {
		o.Devices = []string{"pump1", "valve1"}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// startController runs the controller of cmd/controller (lease/server) on
// the stack's broker, with a fresh key and the bbolt store in Dir, and
// waits until it is ready (store open, MQTT API subscribed).
func (s *Stack) startController(ctx context.Context) error {
	key := filepath.Join(s.opts.Dir, "controller.key")
	s.PubKey = filepath.Join(s.opts.Dir, "controller.pub")
	priv, err := fence.WriteKeyFiles(key, s.PubKey, true)
	if err != nil {
		return err
	}
	if s.Signer, err = fence.NewSigner(priv); err != nil {
		return err
	}
	cfg := server.Config{DataDir: s.opts.Dir, Key: key, MQTT: server.MQTTConfig{Config: mqtt.Config{Broker: s.Broker.URL()}}}
	c, err := server.New(cfg, s.opts.Log.With("component", "controller"))
	if err != nil {
		return err
	}
	s.ctrl = run(c.Run)
	return waitFor(ctx, func() bool { return c.Ready() == nil }, "controller subscribed")
}

func (s *Stack) startAgent(ctx context.Context) error {
	cfg := agent.Config{Agent: agent.AgentConfig{ID: "gw1", DataDir: filepath.Join(s.opts.Dir, "agent")},
		MQTT: agent.MQTTConfig{Broker: s.Broker.URL()}, Trust: agent.TrustConfig{Keys: []string{s.PubKey}},
		HTTP: agent.HTTPConfig{Listen: "off"}}
	for _, id := range s.opts.Devices {
		node, err := simSettings(s.DeviceLog(id), s.opts.Latency)
		if err != nil {
			return err
		}
		cfg.Devices = append(cfg.Devices, agent.DeviceConfig{ID: id, Domain: s.opts.Domain, Driver: "sim", Settings: node})
	}
	online, stop, err := watchOnline(ctx, s.Broker.URL(), "gw1")
	if err != nil {
		return err
	}
	defer stop()
	a, err := agent.New(cfg.WithDefaults(), s.opts.Log.With("component", "agent"))
	if err != nil {
		return err
	}
	s.agent = run(a.Run)
	select {
	case <-online:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stack: agent not online: %w", ctx.Err())
	}
}

func simSettings(logPath string, latency time.Duration) (yaml.Node, error) {
	var doc yaml.Node
	src := fmt.Sprintf("log: %q\nlatency: %s\n", logPath, latency)
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		return yaml.Node{}, err
	}
	return *doc.Content[0], nil
}

// watchOnline subscribes to agent's retained status (again on every
// connection, through mqtt.Dial) and returns a channel closed when it
// reports online (its subscriptions are in place by then).
func watchOnline(ctx context.Context, broker, agentID string) (<-chan struct{}, func(), error) {
	online := make(chan struct{})
	var once sync.Once
	handler := func(_ paho.Client, m paho.Message) {
		var st protocol.AgentStatus
		if json.Unmarshal(m.Payload(), &st) == nil && st.Online {
			once.Do(func() { close(online) })
		}
	}
	c, err := mqtt.Dial(ctx, mqtt.Config{Broker: broker, ClientID: "fencegate-stack-watch"},
		map[string]paho.MessageHandler{protocol.Topics{}.AgentStatus(agentID): handler})
	if err != nil {
		return nil, nil, err
	}
	return online, func() { c.Disconnect(100) }, nil
}

func waitFor(ctx context.Context, ready func() bool, what string) error {
	for !ready() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("stack: %s: %w", what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// URL is the broker URL for supervisors.
func (s *Stack) URL() string { return s.Broker.URL() }

// Domain is the devices' fencing domain.
func (s *Stack) Domain() string { return s.opts.Domain }

// Devices lists the device ids.
func (s *Stack) Devices() []string { return s.opts.Devices }

// DeviceLog is the path of a device's apply log (devices/sim format).
func (s *Stack) DeviceLog(device string) string {
	return filepath.Join(s.opts.Dir, device+"-applied.log")
}

// Close stops the agent, the controller and the broker, in that order.
func (s *Stack) Close() error {
	errs := []error{s.agent.stop(), s.ctrl.stop()}
	if s.Broker != nil {
		errs = append(errs, s.Broker.Close())
	}
	return errors.Join(errs...)
}
