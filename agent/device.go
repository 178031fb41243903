package agent

import (
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/protocol"
)

// device is one device the agent owns: its driver and its two-stage worker.
// decide and apply each run in their own goroutine (see package doc),
// started when their queue gets work and gone when it is empty, so an idle
// device holds no goroutine; the MQTT callback only puts messages in inbox.
type device struct {
	id, domain string
	dom        *domain // the device's fencing domain, shared with its other devices
	cfg        DeviceConfig
	driver     devices.Driver
	caps       devices.Capabilities
	log        *slog.Logger
	env        *env

	inbox  *queue[inbound] // MQTT callback → decide
	applyQ *queue[pending] // decide → apply, in accept order

	resultsTopic string           // default reply topic
	queueDepth   prometheus.Gauge // this device's fencegate_agent_queue_depth

	stateMu   sync.Mutex // serializes publishState
	mu        sync.Mutex // guards last and available
	last      *protocol.Result
	available bool
}

// env is what every device worker shares with the agent.
type env struct {
	store      *persist.Store
	keys       *fence.KeyRing
	topics     protocol.Topics
	replies    protocol.ReplyRule // where reply_to may point
	pub        publisher
	m          *metrics
	agentID    string
	maxPayload int
	fatal      func(error) // reports a store failure; the agent stops

	deciders, appliers sync.WaitGroup // running decide and apply workers of every device
}

// publisher sends MQTT messages without blocking the caller for long.
type publisher interface {
	publish(topic string, payload []byte, retained bool)
}

// inbound is one command message for the decide stage.
type inbound struct {
	payload []byte
	ack     func() // acknowledges the MQTT message
}

// pending is an accepted command (or a retry of one in flight) for the
// apply stage.
type pending struct {
	cmd     protocol.Command
	tok     fence.Token
	replyTo string
	await   bool // a retry of a command in flight: answer once it is done
	// unverified: tok was read without its signature check (a claimed
	// position below the fence, answered stale_token; decide.go
	// staleUnverified). Its holder is only what the token claims.
	unverified bool
}

func newDevice(cfg DeviceConfig, dom *domain, drv devices.Driver, e *env, queue int, log *slog.Logger) *device {
	d := &device{id: cfg.ID, domain: cfg.Domain, dom: dom, cfg: cfg, driver: drv, caps: drv.Describe(), env: e,
		log: log, available: true,
		resultsTopic: e.topics.DeviceResults(cfg.ID), queueDepth: e.m.queueDepth.WithLabelValues(cfg.ID)}
	d.inbox = newQueue[inbound](queue, func() { e.deciders.Go(d.decideWorker) })
	d.applyQ = newQueue[pending](queue, func() { e.appliers.Go(d.applyWorker) })
	return d
}

// decideWorker decides queued commands until the inbox is empty; the
// inbox starts it on demand (at most one per device at a time).
func (d *device) decideWorker() {
	for {
		in, ok := d.inbox.next()
		if !ok {
			return
		}
		d.decide(in)
	}
}

// applyWorker applies in accept order until the apply queue is empty; the
// apply queue starts it on demand (at most one per device at a time).
func (d *device) applyWorker() {
	for {
		p, ok := d.applyQ.next()
		switch {
		case !ok:
			return
		case p.await:
			d.answerAwaited(p)
		default:
			d.apply(p)
		}
	}
}

// setLast records the latest result; a device_unavailable result marks the
// device unavailable and any other result from the driver available again,
// except in_doubt: a driver that lost the device mid-command reports when
// it is back (AvailabilityReporter).
func (d *device) setLast(r protocol.Result) {
	d.mu.Lock()
	d.last = &r
	d.mu.Unlock()
	if r.Code == protocol.CodeInDoubt {
		return
	}
	d.setAvailable(r.Code != protocol.CodeDeviceUnavailable, r.Message)
}

// setAvailable records a change of availability (from a result or from the
// driver's AvailabilityReporter) and announces it in the state topic.
func (d *device) setAvailable(available bool, reason string) {
	d.mu.Lock()
	changed := d.available != available
	d.available = available
	d.mu.Unlock()
	if !changed {
		return
	}
	d.log.Info("device availability changed", "available", available, "reason", reason)
	d.publishState()
}

// publishState announces the device's state (retained). Calls are
// serialized, each reading the state and publishing it under stateMu, so
// a state read earlier can never be published after a newer one.
func (d *device) publishState() {
	d.stateMu.Lock()
	defer d.stateMu.Unlock()
	d.mu.Lock()
	online := d.available
	d.mu.Unlock()
	s := protocol.DeviceState{Device: d.id, Domain: d.domain, Agent: d.env.agentID, Online: online, Fence: d.fenceView(), UpdatedAt: now()}
	d.env.pub.publish(d.env.topics.DeviceState(d.id), mustJSON(s), true)
}
