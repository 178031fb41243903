package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
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
	intake atomic.Bool   // false once shutdown began: messages are left unacked
	settle chan struct{} // one slot: some domain has a pending grant to make durable
	done   chan struct{}

	commands map[string]*device // command topic → device; set by start, read-only after
	grants   map[string]bool    // grant topics of the domains; set by start, read-only after

	grantsMu   sync.Mutex      // guards grantsSeen and lastGrant
	grantsSeen map[string]bool // grant topics heard from since the last connect
	lastGrant  time.Time       // when the last grant announcement arrived
}

// newConnection prepares the client without connecting (New calls it before
// opening drivers, so env.pub is set before anything can publish); start
// connects it. A publish before the first connection is dropped (publish).
func (a *Agent) newConnection() (*connection, error) {
	c := &connection{a: a, log: a.log.With("component", "mqtt"), settle: make(chan struct{}, 1), done: make(chan struct{}),
		grantsSeen: map[string]bool{}}
	c.intake.Store(true)
	cfg := a.cfg.MQTT.client()
	cfg.Broker = a.dialURL()
	opts, err := cfg.ClientOptions(c.onConnect)
	if err != nil {
		return nil, err
	}
	will := mustJSON(protocol.AgentStatus{Online: false, At: now()})
	opts.SetAutoAckDisabled(true).SetOrderMatters(true).SetDefaultPublishHandler(c.route).
		SetWill(a.env.topics.AgentStatus(a.cfg.Agent.ID), string(will), 1, true).
		SetConnectionLostHandler(c.onLost)
	c.client = paho.NewClient(opts)
	a.env.pub = c
	return c, nil
}

// start connects in the background: with connect-retry the client keeps
// trying, and onConnect subscribes after every connection.
func (c *connection) start() {
	c.indexTopics()
	go c.settleGrants()
	c.client.Connect()
}

// onConnect runs in its own paho goroutine after every (re)connection. It
// subscribes to the grant topics first and makes the retained grants
// durable before it subscribes to commands, so that after an outage a stale
// command cannot be accepted ahead of the grant that fences it. Every
// device's state is announced before the command subscription (so no state
// of a later raise can be overwritten by it), the agent's status after it
// (online means commands are taken).
func (c *connection) onConnect(cl paho.Client) {
	a := c.a
	a.env.m.mqttUp.Set(1)
	c.awaitRetainedGrants(cl)
	for _, dm := range a.domains {
		if err := dm.settle(context.Background()); err != nil {
			a.fail(err)
			return
		}
	}
	for _, d := range a.devices { // before commands: a state published by a command's raise must come after
		d.publishState()
	}
	c.subscribeCommands(cl)
	c.log.Info("connected", "broker", mqtt.Redact(a.BrokerURL()))
	c.publish(a.env.topics.AgentStatus(a.cfg.Agent.ID),
		mustJSON(protocol.AgentStatus{Online: true, Boot: a.boot.UTC().Format(time.RFC3339), Version: Version, At: now()}), true)
}

// subscribeCommands subscribes to the devices' command topics: one topic
// per owned device, or — with agent.answer_unknown_devices, for a broker
// this agent has to itself — one wildcard, so that a command for a device
// it does not own is answered bad_request instead of going unanswered.
// The subscriptions carry no paho route: route dispatches every message.
func (c *connection) subscribeCommands(cl paho.Client) {
	t := c.a.env.topics
	if c.a.cfg.Agent.AnswerUnknownDevices {
		cl.Subscribe(t.AllDeviceCommands(), 1, nil)
		return
	}
	filters := make(map[string]byte, subscribeChunk)
	for topic := range c.commands {
		filters[topic] = 1
		if len(filters) == subscribeChunk {
			cl.SubscribeMultiple(filters, nil)
			filters = make(map[string]byte, subscribeChunk)
		}
	}
	if len(filters) > 0 {
		cl.SubscribeMultiple(filters, nil)
	}
}

// subscribeChunk is the most topics one SUBSCRIBE packet carries.
const subscribeChunk = 256

// route is the client's only message handler (paho's default handler; no
// subscription registers a route, so paho does not match each message
// against every device's topic): a command goes to its device by a map
// lookup, a grant announcement to onGrant; with
// agent.answer_unknown_devices a command for a device not owned is
// answered. Anything else is acknowledged and dropped. It runs in paho's
// callback goroutine and never blocks.
func (c *connection) route(cl paho.Client, m paho.Message) {
	if d := c.commands[m.Topic()]; d != nil {
		c.onCommand(d, m)
		return
	}
	if c.grants[m.Topic()] {
		c.onGrant(cl, m)
		return
	}
	if id, leaf, err := c.a.env.topics.ParseDeviceTopic(m.Topic()); err == nil && leaf == "commands" && c.a.cfg.Agent.AnswerUnknownDevices {
		c.unknownDevice(id, m)
		return
	}
	m.Ack()
}

// indexTopics fills the topic maps route reads; called once, before the
// first connection, after the devices are open. The maps are read-only
// afterwards.
func (c *connection) indexTopics() {
	c.commands = make(map[string]*device, len(c.a.devices))
	for _, d := range c.a.devices {
		c.commands[c.a.env.topics.DeviceCommands(d.id)] = d
	}
	c.grants = make(map[string]bool, len(c.a.domains))
	for name := range c.a.domains {
		c.grants[c.a.env.topics.LeaseGrant(name)] = true
	}
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
	if rt := protocol.Salvage(m.Payload(), "reply_to", protocol.MaxReplyTopicBytes); c.a.env.replies.Check(rt) == nil {
		topic = rt
	}
	if topic == "" {
		c.log.Warn("command for an invalid device id, no reply topic", "device", id)
		return
	}
	r := protocol.Result{ID: protocol.Salvage(m.Payload(), "id", protocol.MaxCommandIDLen), Device: id,
		Status: protocol.StatusRejected, Code: protocol.CodeBadRequest, Message: "unknown device: agent " + c.a.cfg.Agent.ID + " does not own " + id, At: now()}
	c.a.env.m.answered(protocol.CodeBadRequest)
	c.publish(topic, mustJSON(r), false)
}

func (c *connection) onLost(_ paho.Client, err error) {
	c.a.env.m.mqttUp.Set(0)
	c.log.Warn("connection lost; reconnecting", "err", err)
}

// onCommand takes one command message for device d. It never blocks: the
// message goes into the device's queue, or is answered busy when the queue
// is full.
func (c *connection) onCommand(d *device, m paho.Message) {
	if !c.intake.Load() {
		return // shutting down: not taken; the sender's retry (same id) reaches the next run
	}
	if m.Retained() {
		c.log.Warn("ignoring a retained command; commands must not be retained", "device", d.id)
		m.Ack()
		return
	}
	if n := len(m.Payload()); n > c.a.env.maxPayload {
		// Refused before it is queued: an oversize payload never holds queue memory.
		p, rej := d.undecodable(m.Payload(), fmt.Sprintf("payload is %d bytes, at most %d", n, c.a.env.maxPayload))
		d.answer(p.replyTo, *rej)
		m.Ack()
		return
	}
	switch d.inbox.tryPush(inbound{payload: m.Payload(), ack: m.Ack}) {
	case full:
		c.busy(d, m)
	case closedOut: // shutting down: not taken, as above
	}
}

func (c *connection) busy(d *device, m paho.Message) {
	topic := d.resultsTopic
	if rt := protocol.Salvage(m.Payload(), "reply_to", protocol.MaxReplyTopicBytes); c.a.env.replies.Check(rt) == nil {
		topic = rt
	}
	d.answer(topic, d.reject(protocol.Salvage(m.Payload(), "id", protocol.MaxCommandIDLen), protocol.CodeBusy, "device queue is full"))
	m.Ack()
}

// awaitRetainedGrants subscribes to the grant topic of every domain and
// waits until each has delivered its retained grant, or no grant arrived
// for grantQuiet, or mqtt.grant_wait passed — a topic with no retained
// grant delivers nothing, so the wait cannot be exact.
func (c *connection) awaitRetainedGrants(cl paho.Client) {
	filters := map[string]byte{}
	for name := range c.a.domains {
		filters[c.a.env.topics.LeaseGrant(name)] = 1
	}
	c.grantsMu.Lock()
	c.grantsSeen, c.lastGrant = map[string]bool{}, time.Now()
	c.grantsMu.Unlock()
	if err := mqtt.Wait(cl.SubscribeMultiple(filters, nil), c.a.cfg.MQTT.GrantWait); err != nil { // route dispatches
		c.log.Warn("subscribing to grants", "err", err)
	}
	c.grantsMu.Lock()
	c.lastGrant = time.Now() // the quiet period starts once the broker has the subscription
	c.grantsMu.Unlock()
	deadline := time.Now().Add(c.a.cfg.MQTT.GrantWait)
	for time.Now().Before(deadline) && !c.grantsSettled(len(filters)) {
		time.Sleep(10 * time.Millisecond)
	}
}

// grantQuiet is how long after the last grant announcement (or the grant
// subscription) the agent takes the retained grants to be all delivered.
const grantQuiet = 250 * time.Millisecond

func (c *connection) grantsSettled(topics int) bool {
	c.grantsMu.Lock()
	defer c.grantsMu.Unlock()
	return len(c.grantsSeen) >= topics || time.Since(c.lastGrant) > grantQuiet
}

// onGrant verifies a grant announcement and puts it in its domain's grant
// slot (newest wins: nothing is dropped), then wakes settleGrants, which
// makes it durable. Verification is cached per token, so a repeated grant
// costs a map lookup; the callback never waits for the disk.
func (c *connection) onGrant(_ paho.Client, m paho.Message) {
	defer m.Ack()
	defer c.sawGrant(m.Topic()) // after the grant is in its slot: the connect sequence settles it
	tok, err := c.verifyGrant(m.Payload())
	if err != nil {
		c.a.env.m.grantsIgnore.Inc()
		c.log.Warn("ignoring grant announcement", "topic", m.Topic(), "err", err)
		return
	}
	dm := c.a.domains[tok.Domain]
	if dm == nil || c.a.env.topics.LeaseGrant(tok.Domain) != m.Topic() {
		c.a.env.m.grantsIgnore.Inc()
		c.log.Warn("ignoring grant announcement for another topic's domain", "topic", m.Topic(), "domain", tok.Domain)
		return
	}
	dm.offer(tok)
	select {
	case c.settle <- struct{}{}:
	default: // a wake-up is already pending; it settles every domain
	}
}

func (c *connection) sawGrant(topic string) {
	c.grantsMu.Lock()
	c.grantsSeen[topic], c.lastGrant = true, time.Now()
	c.grantsMu.Unlock()
}

// maxGrantPayload bounds a grant announcement: {"token": ...} with a token
// of at most fence.MaxTokenLen bytes.
const maxGrantPayload = 4 << 10

func (c *connection) verifyGrant(payload []byte) (fence.Token, error) {
	var g protocol.Grant
	if len(payload) > maxGrantPayload {
		return fence.Token{}, fmt.Errorf("announcement of %d bytes, at most %d", len(payload), maxGrantPayload)
	}
	if err := json.Unmarshal(payload, &g); err != nil || g.Token == "" {
		return fence.Token{}, errors.New("undecodable announcement")
	}
	return c.a.env.keys.Verify(g.Token)
}

// settleGrants makes pending grants durable, every domain's, each time
// onGrant wakes it, until close.
func (c *connection) settleGrants() {
	for {
		select {
		case <-c.settle:
			for _, dm := range c.a.domains {
				if err := dm.settle(context.Background()); err != nil {
					c.a.fail(err)
					return
				}
			}
		case <-c.done:
			return
		}
	}
}

// publish sends without waiting for the broker's acknowledgement: results
// are journaled first, so a lost publish is recovered by the sender's retry,
// and states and status are announced again on every connect. So nothing
// is handed to paho while disconnected: paho 1.5.1 would resend it from its
// store on reconnect while writing the queued copy too (a data race in its
// resume), and it would go out after the connect-time announcements.
func (c *connection) publish(topic string, payload []byte, retained bool) {
	if !c.client.IsConnectionOpen() {
		return
	}
	c.client.Publish(topic, 1, retained, payload)
}

func (c *connection) stopIntake() { c.intake.Store(false) }

// close announces the agent offline and disconnects, waiting briefly for
// queued publishes to go out.
func (c *connection) close() {
	close(c.done)
	if c.client.IsConnected() {
		st := mustJSON(protocol.AgentStatus{Online: false, Boot: c.a.boot.UTC().Format(time.RFC3339), Version: Version, At: now()})
		_ = mqtt.Wait(c.client.Publish(c.a.env.topics.AgentStatus(c.a.cfg.Agent.ID), 1, true, st), 2*time.Second)
	}
	c.client.Disconnect(500)
	c.a.env.m.mqttUp.Set(0)
}

var _ publisher = (*connection)(nil)
