package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// plAgent names the agent of a power-loss campaign.
const plAgent = "agent1"

// plBootBound bounds how long the agent may take to come back online.
const plBootBound = 60 * time.Second

// errAgentExited: the agent process ended before it came online.
var errAgentExited = errors.New("the agent exited before it came online")

// powerLossPlan draws the installation of a campaign: 3 or 4 sim devices
// in two domains, all on one agent, one of them failing every few applies
// (device_error answers are journaled results too).
func powerLossPlan(seed uint64, r *rand.Rand) (Plan, string) {
	p := Plan{Seed: seed, TTL: plTTL, Queue: 8, Agents: 0, // the campaign starts its agent itself
		Options: map[string]string{"broker": "embedded", "store": "bbolt"}}
	p.Domains = []DomainPlan{{Name: "d1"}, {Name: "d2"}}
	for i := range 3 + r.IntN(2) {
		d := &p.Domains[i%2]
		d.Devices = append(d.Devices, DevicePlan{ID: fmt.Sprintf("sim%d", i+1), Kind: DeviceSim,
			Latency: time.Duration(r.IntN(20)) * time.Millisecond})
	}
	all := p.devices()
	return p, all[r.IntN(len(all))]
}

// devices lists the plan's device ids.
func (p Plan) devices() []string {
	var ids []string
	for _, d := range p.Domains {
		for _, dev := range d.Devices {
			ids = append(ids, dev.ID)
		}
	}
	return ids
}

// writeAgentConfig writes the agent's config: the usual agent config of
// the installation (agentConfig), with the data directory and every sim
// device's apply log and fence file on the lossy mount, and the devices
// checking tokens themselves (fence_file, no no_fence). failing fails
// every few applies.
func writeAgentConfig(in *install, mnt, failing string, failEvery int) (string, error) {
	cfg := in.agentConfig(0, plAgent, "tcp://"+in.brokerAddr)
	cfg["agent"].(map[string]any)["data_dir"] = filepath.Join(mnt, plAgent+"-data")
	devs, _ := cfg["devices"].([]map[string]any)
	for _, dev := range devs {
		id, _ := dev["id"].(string)
		s, _ := dev["settings"].(map[string]any)
		if s == nil {
			return "", fmt.Errorf("agent config: device %q has no sim settings", id)
		}
		s["log"] = filepath.Join(mnt, logName(id))
		s["fence_file"] = filepath.Join(mnt, id+".fence")
		delete(s, "no_fence")
		if id == failing {
			s["fail_every"] = failEvery
		}
	}
	path := in.path(plAgent + ".yaml")
	return path, writeYAML(path, cfg)
}

// osProcess returns the process p runs now, or nil.
func (p *proc) osProcess() *os.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	return p.cmd.Process
}

// done returns a channel closed when p's current process has ended (nil
// before the first start).
func (p *proc) done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// logTail returns the last n lines of p's log file.
func (p *proc) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-n):], []byte("\n")))
}

// agentWatch follows the agent's retained status. The devices' retained
// states outlive a killed agent (only its status has a will), so a
// restart is seen by the status's time: online, stamped after the start.
type agentWatch struct {
	c      paho.Client
	mu     sync.Mutex
	online bool
	at     time.Time
	change chan struct{} // a status arrived (buffered, 1)
}

// watchAgent subscribes to agent's status on the broker at addr.
func watchAgent(ctx context.Context, addr, agent string) (*agentWatch, error) {
	w := &agentWatch{change: make(chan struct{}, 1)}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := mqtt.Dial(dctx, mqtt.Config{Broker: "tcp://" + addr, ClientID: "fencechaos-powerloss-observer",
		KeepAlive: 2 * time.Second, ConnectTimeout: 2 * time.Second, MaxReconnectInterval: time.Second},
		map[string]paho.MessageHandler{protocol.Topics{}.AgentStatus(agent): w.onStatus})
	if err != nil {
		return nil, fmt.Errorf("agent status observer: %w", err)
	}
	w.c = c
	return w, nil
}

func (w *agentWatch) onStatus(_ paho.Client, m paho.Message) {
	var s protocol.AgentStatus
	if json.Unmarshal(m.Payload(), &s) != nil {
		return
	}
	at, err := time.Parse(time.RFC3339Nano, s.At)
	if err != nil {
		return
	}
	w.mu.Lock()
	w.online, w.at = s.Online, at
	w.mu.Unlock()
	select {
	case w.change <- struct{}{}:
	default:
	}
}

// onlineSince reports whether the latest status is online and stamped at
// or after since.
func (w *agentWatch) onlineSince(since time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.online && !w.at.Before(since)
}

// waitBoot waits until the agent started at since announces itself
// online; errAgentExited if exited closes first.
func (w *agentWatch) waitBoot(ctx context.Context, since time.Time, exited <-chan struct{}) error {
	t := time.NewTimer(plBootBound)
	defer t.Stop()
	for !w.onlineSince(since) {
		select {
		case <-w.change:
		case <-exited:
			if w.onlineSince(since) {
				return nil
			}
			return errAgentExited
		case <-t.C:
			return fmt.Errorf("the agent is not online %v after its start", plBootBound)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (w *agentWatch) close() { w.c.Disconnect(100) }
