package mqttrelay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
)

func init() {
	devices.Register("mqttrelay", factory)
	devices.RegisterCheck("mqttrelay", devices.DecodeCheck(func() any { return new(Config) }))
}

func factory(device string, s devices.Settings, log *slog.Logger) (devices.Driver, error) {
	var cfg Config
	if err := s.DecodeValid(&cfg); err != nil {
		return nil, err
	}
	return Open(device, cfg, s.Broker, log)
}

// Relay drives one MQTT-attached controller. It implements devices.Driver
// and devices.AvailabilityReporter with the contracts documented there; in
// addition every method is safe for concurrent use. Its MQTT client's
// callbacks never block: they hand confirmations to waiting applies.
type Relay struct {
	device string
	cfg    Config // defaults applied; read-only
	log    *slog.Logger
	ops    map[string]*opSpec // read-only after Open
	caps   devices.Capabilities
	client paho.Client
	ready  chan struct{} // closed after the first subscription
	once   sync.Once     // closes ready
	kick   chan struct{} // capacity 1: the session ended, maintain connects a fresh one
	stop   chan struct{} // closed by Close: maintain returns
	done   chan struct{} // closed when maintain has returned
	closed sync.Once     // runs Close's work once

	mu        sync.Mutex // guards the fields below
	waiters   map[*waiter]struct{}
	connected bool
	online    bool // as the LWT last said; true without LWT
	reported  bool // availability as last reported (the agent assumes true)
	handler   func(available bool, reason string)
}

var (
	_ devices.Driver               = (*Relay)(nil)
	_ devices.AvailabilityReporter = (*Relay)(nil)
	_ devices.TopicPublisher       = (*Relay)(nil)
)

// waiter is an apply waiting for its confirmation.
type waiter struct {
	topic string
	match func([]byte) (string, bool)
	got   chan string   // capacity 1: the confirming value
	lost  chan struct{} // closed if the controller or the broker is lost meanwhile
	why   string        // why lost was closed; set under Relay.mu before closing
}

// Open validates cfg, connects to cfg.Broker (default broker, the agent's
// own) and subscribes to the confirmation and LWT topics. It waits up to
// 10 s for the first connection. log may be nil.
func Open(device string, cfg Config, broker string, log *slog.Logger) (*Relay, error) {
	if err := cfg.Validate("settings"); err != nil {
		return nil, err
	}
	if err := fence.CheckID("device", device); err != nil {
		return nil, fmt.Errorf("mqttrelay: %w", err)
	}
	cfg = cfg.withDefaults(device, broker)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Relay{device: device, cfg: cfg, log: log, ops: newOpSpecs(cfg), ready: make(chan struct{}),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		waiters: map[*waiter]struct{}{}, online: cfg.Availability == nil, reported: true}
	r.caps = capabilities(cfg)
	if err := r.connect(); err != nil {
		return nil, err
	}
	return r, nil
}

func capabilities(c Config) devices.Capabilities {
	caps := devices.Capabilities{Ops: make(map[string]devices.Op, len(c.Ops))}
	for _, op := range c.Ops {
		caps.Ops[op.Name] = devices.Op{Idempotent: op.Idempotent}
	}
	return caps
}

// onMessage routes a message: LWT → availability, else to waiting applies.
// A retained message (one the broker replays to a new subscription) is
// old news and confirms nothing; the LWT is retained by design. It never
// blocks.
func (r *Relay) onMessage(_ paho.Client, m paho.Message) {
	if a := r.cfg.Availability; a != nil && m.Topic() == a.Topic {
		r.onLWT(string(m.Payload()))
	}
	if !m.Retained() {
		r.deliver(m.Topic(), m.Payload())
	}
}

func (r *Relay) onLWT(payload string) {
	a := r.cfg.Availability
	switch payload {
	case a.Online:
		r.update(func() { r.online = true })
	case a.Offline:
		r.update(func() {
			r.online = false
			r.loseWaitersLocked("the controller went offline (LWT)")
		})
	default:
		r.log.Warn("unexpected LWT payload", "topic", a.Topic, "payload", payload)
	}
}

// deliver hands payload to the first waiter on topic whose rule it matches.
func (r *Relay) deliver(topic string, payload []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for w := range r.waiters {
		if w.topic != topic {
			continue
		}
		if v, ok := w.match(payload); ok {
			w.got <- v
			delete(r.waiters, w)
			return
		}
	}
}

// loseWaitersLocked ends every waiting apply with why; r.mu is held.
func (r *Relay) loseWaitersLocked(why string) {
	for w := range r.waiters {
		w.why = why
		close(w.lost)
		delete(r.waiters, w)
	}
}

// update changes state under r.mu, then reports a change of availability.
func (r *Relay) update(change func()) {
	r.mu.Lock()
	change()
	ok, why := r.availableLocked()
	changed := ok != r.reported
	r.reported = ok
	h := r.handler
	r.mu.Unlock()
	if changed && h != nil {
		h(ok, why)
	}
}

func (r *Relay) availableLocked() (bool, string) {
	switch {
	case !r.connected:
		return false, "relay is not connected to the controller's broker"
	case !r.online:
		return false, "controller is offline (LWT)"
	}
	return true, "controller is online"
}

// OnAvailability registers handler; if the device is unavailable already,
// handler is called at once (the agent assumes available).
func (r *Relay) OnAvailability(handler func(available bool, reason string)) {
	r.mu.Lock()
	r.handler = handler
	ok, why := r.availableLocked()
	r.reported = ok
	r.mu.Unlock()
	if !ok {
		handler(false, why)
	}
}

// Describe returns the configured ops; ChecksTokens is false. The caller
// may modify the returned map.
func (r *Relay) Describe() devices.Capabilities {
	c := r.caps
	c.Ops = maps.Clone(r.caps.Ops)
	return c
}

// PublishedTopics returns the command topics of the ops, sorted, once
// each: the relay publishes nowhere else.
func (r *Relay) PublishedTopics() []string {
	var topics []string
	for _, op := range r.cfg.Ops {
		topics = append(topics, op.Topic)
	}
	slices.Sort(topics)
	return slices.Compact(topics)
}

// Apply publishes cmd's payload on the op's topic and, if the op has a
// confirmation rule, waits for a matching message. Once Apply has
// returned, the command is never published again: a publish the relay
// gave up on ends the broker session, and the next one starts clean (see
// maintain), so paho never resends it.
//
//   - unknown op → unknown_op; device offline or relay disconnected →
//     device_unavailable (nothing published); args that do not fill the
//     templates → device_error (nothing published);
//   - the publish may have left but was not acknowledged (no PUBACK before
//     ctx is done, the connection lost meanwhile, any other publish error)
//     → in_doubt;
//   - acknowledged, but no confirmation within the op's timeout (or before
//     ctx is done), or the controller went offline or the broker was lost
//     while waiting → in_doubt: the command may have reached the device.
//
// Output: {"topic", "payload"} of the confirmation, or of the command
// without a rule.
func (r *Relay) Apply(ctx context.Context, cmd devices.Command) (json.RawMessage, error) {
	spec, ok := r.ops[cmd.Op]
	if !ok {
		return nil, devices.Errorf(devices.CodeUnknownOp, "device %q has no op %q", r.device, cmd.Op)
	}
	args, err := parseArgs(cmd.Args)
	if err != nil {
		return nil, err
	}
	payload, err := render(spec.payload, args)
	if err != nil {
		return nil, err
	}
	var w *waiter
	if spec.Confirm != nil {
		if w, err = r.newWaiter(spec, args); err != nil {
			return nil, err
		}
		defer r.dropWaiter(w)
	}
	if err := r.register(w); err != nil {
		return nil, err
	}
	if err := r.publish(ctx, spec, payload); err != nil {
		return nil, err
	}
	if w == nil {
		return output(map[string]string{"topic": spec.Topic, "payload": payload}), nil
	}
	return r.await(ctx, spec, w)
}

func (r *Relay) newWaiter(spec *opSpec, args map[string]any) (*waiter, error) {
	match, err := spec.matcher(args)
	if err != nil {
		return nil, err
	}
	return &waiter{topic: spec.Confirm.Topic, match: match, got: make(chan string, 1), lost: make(chan struct{})}, nil
}

// register checks availability and, in the same step, adds w (if any), so
// that a confirmation arriving right after the publish is not missed.
func (r *Relay) register(w *waiter) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ok, why := r.availableLocked(); !ok {
		return devices.Errorf(devices.CodeDeviceUnavailable, "%s", why)
	}
	if w != nil {
		r.waiters[w] = struct{}{}
	}
	return nil
}

func (r *Relay) dropWaiter(w *waiter) {
	r.mu.Lock()
	delete(r.waiters, w)
	r.mu.Unlock()
}

// publish publishes payload (QoS 1, never retained) and waits for the
// PUBACK. Only a publish paho refused up front (not connected) is known
// not to have left; after any other failure the session is dropped, so
// the packet paho keeps for a resend dies with it.
func (r *Relay) publish(ctx context.Context, spec *opSpec, payload string) error {
	tok := r.client.Publish(spec.Topic, 1, false, payload)
	select {
	case <-tok.Done():
	case <-ctx.Done():
		r.drop("no PUBACK before a command's deadline")
		return &devices.Error{Code: devices.CodeInDoubt, Err: context.Cause(ctx),
			Message: "no PUBACK from the broker before the deadline: the command may have reached " + spec.Topic + "; it is not resent"}
	}
	err := tok.Error()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, paho.ErrNotConnected):
		return &devices.Error{Code: devices.CodeDeviceUnavailable, Message: "publish " + spec.Topic + ": nothing sent: " + err.Error(), Err: err}
	}
	r.drop("publish failed: " + err.Error())
	return &devices.Error{Code: devices.CodeInDoubt, Err: err,
		Message: "publish " + spec.Topic + ": " + err.Error() + ": the command may have reached the broker; it is not resent"}
}

func (r *Relay) await(ctx context.Context, spec *opSpec, w *waiter) (json.RawMessage, error) {
	t := time.NewTimer(spec.timeout)
	defer t.Stop()
	select {
	case v := <-w.got:
		return output(map[string]string{"topic": w.topic, "payload": v}), nil
	case <-w.lost:
		return nil, devices.Errorf(devices.CodeInDoubt, "%s before the confirmation on %s", w.why, w.topic)
	case <-t.C:
		return nil, devices.Errorf(devices.CodeInDoubt, "no confirmation on %s within %v; the broker took the command", w.topic, spec.timeout)
	case <-ctx.Done():
		return nil, &devices.Error{Code: devices.CodeInDoubt, Err: context.Cause(ctx),
			Message: "no confirmation on " + w.topic + " before the deadline; the broker took the command"}
	}
}
