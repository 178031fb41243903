package agent

import (
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// connection is the agent's MQTT client.
//
// Session choice: clean session. Correctness never depends on the broker
// queueing commands for the agent: a supervisor retries a command (same id)
// until it gets a result, the journal answers retries with the recorded
// result, and a command queued during an outage would carry an ever staler
// token anyway. A persistent session would also make paho resume its stored
// publishes on every connect, which races with the status and state the
// agent publishes from the on-connect handler (paho.mqtt.golang issue 703).
//
// Acknowledgement is manual: a command is acked only once its decision is
// durable, so the broker never counts as delivered a command the agent
// could still lose.
type connection struct {
	a      *Agent
	client paho.Client
	log    *slog.Logger
	intake atomic.Bool // false once shutdown began: messages are left unacked
	grants chan []byte // grant announcements, verified off the callback
	done   chan struct{}
}

// newConnection prepares the client without connecting (New calls it before
// opening drivers, so env.pub is set before anything can publish); start
// connects it. A publish before the first connection is queued by paho.
func (a *Agent) newConnection() (*connection, error) {
	c := &connection{a: a, log: a.log.With("component", "mqtt"), grants: make(chan []byte, 64), done: make(chan struct{})}
	c.intake.Store(true)
	cfg := a.cfg.MQTT.client()
	cfg.Broker = a.BrokerURL()
	opts, err := cfg.ClientOptions(c.onConnect)
	if err != nil {
		return nil, err
	}
	will := mustJSON(mqtt.AgentStatus{Online: false, At: now()})
	opts.SetAutoAckDisabled(true).SetOrderMatters(true).
		SetWill(a.env.topics.AgentStatus(a.cfg.Agent.ID), string(will), 1, true).
		SetConnectionLostHandler(c.onLost)
	c.client = paho.NewClient(opts)
	a.env.pub = c
	return c, nil
}

// start connects in the background: with connect-retry the client keeps
// trying, and onConnect subscribes after every connection.
func (c *connection) start() {
	go c.routeGrants()
	c.client.Connect()
}

// onConnect runs in a paho goroutine after every (re)connection: subscribe,
// then announce status and every device's state.
func (c *connection) onConnect(cl paho.Client) {
	a := c.a
	a.env.m.mqttUp.Set(1)
	c.subscribeCommands(cl)
	filters := map[string]byte{}
	for _, d := range a.devices {
		filters[a.env.topics.LeaseGrant(d.domain)] = 1
	}
	for f := range filters {
		cl.Subscribe(f, 1, c.onGrant)
	}
	c.log.Info("connected", "broker", a.BrokerURL())
	c.publish(a.env.topics.AgentStatus(a.cfg.Agent.ID),
		mustJSON(mqtt.AgentStatus{Online: true, Boot: a.boot.UTC().Format(time.RFC3339), Version: Version, At: now()}), true)
	for _, d := range a.devices {
		d.publishState()
	}
}

// subscribeCommands subscribes to the devices' command topics: one topic
// per owned device, or — with agent.answer_unknown_devices, for a broker
// this agent has to itself — one wildcard, so that a command for a device
// it does not own is answered bad_request instead of going unanswered.
func (c *connection) subscribeCommands(cl paho.Client) {
	t := c.a.env.topics
	if !c.a.cfg.Agent.AnswerUnknownDevices {
		for _, d := range c.a.devices {
			cl.Subscribe(t.DeviceCommands(d.id), 1, c.commandHandler(d))
		}
		return
	}
	cl.Subscribe(t.AllDeviceCommands(), 1, func(pc paho.Client, m paho.Message) {
		id, _, err := t.ParseDeviceTopic(m.Topic())
		if d := c.a.byID[id]; err == nil && d != nil {
			c.commandHandler(d)(pc, m)
			return
		}
		c.unknownDevice(id, m)
	})
}

// unknownDevice answers a command for a device this agent does not own.
// Nothing is stored; the answer carries no fence.
func (c *connection) unknownDevice(id string, m paho.Message) {
	defer m.Ack()
	if m.Retained() {
		return // answering it would repeat on every reconnect
	}
	var topic string
	if fence.ValidID(id) {
		topic = c.a.env.topics.DeviceResults(id)
	}
	if rt := looseReplyTo(m.Payload()); validReplyTo(rt) == nil {
		topic = rt
	}
	if topic == "" {
		c.log.Warn("command for an invalid device id, no reply topic", "device", id)
		return
	}
	r := mqtt.Result{ID: looseID(m.Payload()), Device: id, Status: mqtt.StatusRejected, Code: mqtt.CodeBadRequest,
		Message: "unknown device: agent " + c.a.cfg.Agent.ID + " does not own " + id, At: now()}
	c.a.env.m.answered(mqtt.CodeBadRequest)
	c.publish(topic, mustJSON(r), false)
}

func (c *connection) onLost(_ paho.Client, err error) {
	c.a.env.m.mqttUp.Set(0)
	c.log.Warn("connection lost; reconnecting", "err", err)
}

// commandHandler returns the paho callback for one device's commands. It
// never blocks: the message goes into the device's queue, or is answered
// busy when the queue is full.
func (c *connection) commandHandler(d *device) paho.MessageHandler {
	return func(_ paho.Client, m paho.Message) {
		if !c.intake.Load() {
			return // shutting down: not taken; the sender's retry (same id) reaches the next run
		}
		if m.Retained() {
			c.log.Warn("ignoring a retained command; commands must not be retained", "device", d.id)
			m.Ack()
			return
		}
		select {
		case d.inbox <- inbound{payload: m.Payload(), ack: m.Ack}:
		default:
			c.busy(d, m)
		}
	}
}

func (c *connection) busy(d *device, m paho.Message) {
	topic := d.resultsTopic
	if rt := looseReplyTo(m.Payload()); validReplyTo(rt) == nil {
		topic = rt
	}
	d.answer(topic, d.reject(looseID(m.Payload()), mqtt.CodeBusy, "device queue is full"))
	m.Ack()
}

// onGrant hands a grant announcement to routeGrants without blocking.
func (c *connection) onGrant(_ paho.Client, m paho.Message) {
	select {
	case c.grants <- m.Payload():
	default:
		c.log.Warn("grant dropped: too many pending")
	}
	m.Ack()
}

// routeGrants verifies grant announcements and queues each to the devices
// of its domain, whose decide stage raises the fence durably.
func (c *connection) routeGrants() {
	for {
		select {
		case payload := <-c.grants:
			c.routeGrant(payload)
		case <-c.done:
			return
		}
	}
}

func (c *connection) routeGrant(payload []byte) {
	var g mqtt.Grant
	if err := json.Unmarshal(payload, &g); err != nil || g.Token == "" {
		c.a.env.m.grantsIgnore.Inc()
		c.log.Warn("ignoring undecodable grant announcement")
		return
	}
	tok, err := c.a.env.keys.Verify(g.Token)
	if err != nil {
		c.a.env.m.grantsIgnore.Inc()
		c.log.Warn("ignoring grant announcement with a bad token", "err", err)
		return
	}
	for _, d := range c.a.devices {
		if d.domain != tok.Domain {
			continue
		}
		select {
		case d.inbox <- inbound{grant: &tok}:
		default: // the queue is full: the next command carries the token anyway
		}
	}
}

// publish sends without waiting for the broker's acknowledgement: results
// are journaled first, so a lost publish is recovered by the sender's retry.
func (c *connection) publish(topic string, payload []byte, retained bool) {
	c.client.Publish(topic, 1, retained, payload)
}

func (c *connection) stopIntake() { c.intake.Store(false) }

// close announces the agent offline and disconnects, waiting briefly for
// queued publishes to go out.
func (c *connection) close() {
	close(c.done)
	if c.client.IsConnected() {
		st := mustJSON(mqtt.AgentStatus{Online: false, Boot: c.a.boot.UTC().Format(time.RFC3339), Version: Version, At: now()})
		_ = mqtt.Wait(c.client.Publish(c.a.env.topics.AgentStatus(c.a.cfg.Agent.ID), 1, true, st), 2*time.Second)
	}
	c.client.Disconnect(500)
	c.a.env.m.mqttUp.Set(0)
}

var _ publisher = (*connection)(nil)
