package mqttrelay

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/transport/mqtt"
)

func init() { devices.Register("mqttrelay", factory) }

func factory(device string, s devices.Settings, log *slog.Logger) (devices.Driver, error) {
	var cfg Config
	if err := s.DecodeValid(&cfg); err != nil {
		return nil, err
	}
	return Open(device, cfg, s.Broker, log)
}

// connectWait bounds how long Open waits for the first connection; the
// client keeps retrying after that, and the device is unavailable meanwhile.
const connectWait = 10 * time.Second

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
)

// waiter is an apply waiting for its confirmation.
type waiter struct {
	topic   string
	match   func([]byte) (string, bool)
	got     chan string   // capacity 1: the confirming value
	offline chan struct{} // closed if the controller goes offline meanwhile
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

func (r *Relay) connect() error {
	mc := mqtt.Config{Broker: r.cfg.Broker, ClientID: r.cfg.ClientID, Username: r.cfg.Username, Password: r.cfg.Password}
	if err := mc.Validate("broker"); err != nil {
		return fmt.Errorf("mqttrelay: %w", err)
	}
	opts, err := mc.ClientOptions(r.onConnect)
	if err != nil {
		return fmt.Errorf("mqttrelay: %w", err)
	}
	opts.SetConnectionLostHandler(func(_ paho.Client, err error) {
		r.log.Warn("relay lost its broker connection", "err", err)
		r.update(func() { r.connected = false })
	})
	r.client = paho.NewClient(opts)
	r.client.Connect()
	select {
	case <-r.ready:
	case <-time.After(connectWait):
		r.log.Warn("relay not connected yet; the device is unavailable until it is", "broker", r.cfg.Broker)
	}
	return nil
}

// onConnect subscribes to every confirmation topic and the LWT topic. paho
// calls it in its own goroutine after each connection.
func (r *Relay) onConnect(c paho.Client) {
	topics := map[string]byte{}
	for _, op := range r.cfg.Ops {
		if op.Confirm != nil {
			topics[op.Confirm.Topic] = 1
		}
	}
	if a := r.cfg.Availability; a != nil {
		topics[a.Topic] = 1
	}
	if len(topics) > 0 {
		if err := mqtt.Wait(c.SubscribeMultiple(topics, r.onMessage), connectWait); err != nil {
			r.log.Error("relay cannot subscribe", "err", err)
			return
		}
	}
	r.update(func() { r.connected = true })
	r.once.Do(func() { close(r.ready) })
}

// onMessage routes a message: LWT → availability, else to waiting applies.
// It never blocks.
func (r *Relay) onMessage(_ paho.Client, m paho.Message) {
	if a := r.cfg.Availability; a != nil && m.Topic() == a.Topic {
		r.onLWT(string(m.Payload()))
	}
	r.deliver(m.Topic(), m.Payload())
}

func (r *Relay) onLWT(payload string) {
	a := r.cfg.Availability
	switch payload {
	case a.Online:
		r.update(func() { r.online = true })
	case a.Offline:
		r.update(func() {
			r.online = false
			for w := range r.waiters {
				close(w.offline)
				delete(r.waiters, w)
			}
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

// Close disconnects the relay's client. Later applies fail
// device_unavailable.
func (r *Relay) Close() error {
	r.client.Disconnect(250)
	r.update(func() { r.connected = false })
	return nil
}

// Apply publishes cmd's payload on the op's topic and, if the op has a
// confirmation rule, waits for a matching message:
//
//   - unknown op → unknown_op; device offline or relay disconnected →
//     device_unavailable (nothing published); args that do not fill the
//     templates → device_error (nothing published);
//   - no PUBACK before ctx is done, or no confirmation within the op's
//     timeout (or before ctx is done) → device_timeout;
//   - the controller goes offline while the apply waits → in_doubt.
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
	return &waiter{topic: spec.Confirm.Topic, match: match, got: make(chan string, 1), offline: make(chan struct{})}, nil
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

func (r *Relay) publish(ctx context.Context, spec *opSpec, payload string) error {
	tok := r.client.Publish(spec.Topic, 1, spec.Retain, payload)
	select {
	case <-tok.Done():
	case <-ctx.Done():
		return &devices.Error{Code: devices.CodeDeviceTimeout, Message: "no PUBACK from the broker before the deadline",
			Err: context.Cause(ctx)}
	}
	if err := tok.Error(); err != nil {
		return &devices.Error{Code: devices.CodeDeviceUnavailable, Message: "publish " + spec.Topic + ": " + err.Error(), Err: err}
	}
	return nil
}

func (r *Relay) await(ctx context.Context, spec *opSpec, w *waiter) (json.RawMessage, error) {
	t := time.NewTimer(spec.timeout)
	defer t.Stop()
	select {
	case v := <-w.got:
		return output(map[string]string{"topic": w.topic, "payload": v}), nil
	case <-w.offline:
		return nil, devices.Errorf(devices.CodeInDoubt, "controller went offline before confirming on %s", w.topic)
	case <-t.C:
		return nil, devices.Errorf(devices.CodeDeviceTimeout, "no confirmation on %s within %v", w.topic, spec.timeout)
	case <-ctx.Done():
		return nil, &devices.Error{Code: devices.CodeDeviceTimeout, Message: "no confirmation on " + w.topic + " before the deadline",
			Err: context.Cause(ctx)}
	}
}
