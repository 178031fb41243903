package supervisor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// Config configures a Client. Zero values mean defaults.
type Config struct {
	// MQTT reaches the broker; MQTT.Broker is required. ClientID defaults
	// to "fencegate-sup-<random>".
	MQTT mqtt.Config
	// Prefix of protocol v1 topics; default "fencegate/v1".
	Prefix string
	// Holder names this supervisor in leases; default the client id.
	Holder string
	// RetryInterval is the first wait for an answer before a request or
	// command is sent again (same id); it doubles up to 8 s. Default 1 s.
	RetryInterval time.Duration
}

// Client is a supervisor's connection. Its methods are safe for concurrent
// use. Close it when done.
type Client struct {
	cfg    Config
	topics protocol.Topics
	client paho.Client
	reply  string // this client's reply topic: Topics.ReplyTopic(client id); replies may use subtopics

	mu      sync.Mutex // guards waiting
	waiting map[string]chan []byte

	watchMu sync.Mutex             // guards watches and their refs; held across state (un)subscribe calls
	watches map[string]*stateWatch // by device state topic: WaitHandover's shared subscriptions

	lifeMu     sync.Mutex          // guards closed, leases and the calls to keepalives.Add
	closed     bool                // set by Close: no keepalive starts any more
	leases     map[*Lease]struct{} // leases whose keepalive runs
	keepalives sync.WaitGroup      // the leases' keepalive goroutines
}

// Dial connects to the broker and subscribes to this client's reply
// topic, Topics.ReplyTopic(client id) in the reply namespace (and its
// subtopics), so agents and controllers accept it as reply_to; every
// reconnection subscribes again. It returns once the broker acknowledged
// that subscription, or ctx's error.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.MQTT.ClientID == "" {
		cfg.MQTT.ClientID = "fencegate-sup-" + randomID()[:12]
	}
	if cfg.Holder == "" {
		cfg.Holder = cfg.MQTT.ClientID
	}
	if err := fence.CheckID("holder", cfg.Holder); err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = time.Second
	}
	if err := cfg.MQTT.Validate("mqtt"); err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	c := &Client{cfg: cfg, topics: protocol.Topics{Prefix: cfg.Prefix}, waiting: map[string]chan []byte{},
		watches: map[string]*stateWatch{}, leases: map[*Lease]struct{}{}}
	c.reply = c.topics.ReplyTopic(cfg.MQTT.ClientID)
	client, err := mqtt.Dialer{Config: cfg.MQTT, Subs: map[string]paho.MessageHandler{c.reply + "/#": c.onReply},
		OnSubscribed: func(pc paho.Client, _ error) { c.resubscribeStates(pc) }}.Dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	c.client = client
	return c, nil
}

// resubscribeStates renews WaitHandover's state subscriptions after a
// reconnection (the session is clean); a retained state comes again. It
// runs in the connection's subscribing goroutine.
func (c *Client) resubscribeStates(pc paho.Client) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	for topic, w := range c.watches {
		pc.Subscribe(topic, 1, w.onState)
	}
}

// Holder is the holder name this client uses in leases.
func (c *Client) Holder() string { return c.cfg.Holder }

// Topics returns the protocol topics this client uses.
func (c *Client) Topics() protocol.Topics { return c.topics }

// Close disconnects. Leases it holds are lost at once (their Done closes)
// but not released: use Lease.Release first for a prompt hand-over. It
// returns once every goroutine the client started has ended: the leases'
// keepalives and the connections' subscribing goroutines. Close is called
// once.
func (c *Client) Close() {
	for _, l := range c.shutdown() {
		l.lose(errClientClosed)
	}
	c.keepalives.Wait()
	c.client.Disconnect(250)
}

// errClientClosed is why a lease of a closed client is lost.
var errClientClosed = errors.New("client closed")

// shutdown marks the client closed and returns its leases still renewing.
func (c *Client) shutdown() []*Lease {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	c.closed = true
	leases := make([]*Lease, 0, len(c.leases))
	for l := range c.leases {
		leases = append(leases, l)
	}
	return leases
}

// startKeepalive runs l's keepalive in a goroutine Close waits for; on a
// closed client the lease is lost at once instead.
func (c *Client) startKeepalive(l *Lease) {
	if !c.enroll(l) {
		close(l.stopped)
		l.lose(errClientClosed)
		return
	}
	go func() {
		defer c.keepalives.Done()
		defer c.forget(l)
		defer close(l.stopped)
		l.keepalive()
	}()
}

// enroll counts l's keepalive in, unless the client is closed.
func (c *Client) enroll(l *Lease) bool {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.closed {
		return false
	}
	c.leases[l] = struct{}{}
	c.keepalives.Add(1)
	return true
}

func (c *Client) forget(l *Lease) {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	delete(c.leases, l)
}

// onReply routes a reply (lease response or command result) to its waiter
// by its id; replies nobody waits for any more are dropped.
func (c *Client) onReply(_ paho.Client, m paho.Message) {
	var ids struct {
		RequestID string `json:"request_id"`
		ID        string `json:"id"`
	}
	if json.Unmarshal(m.Payload(), &ids) != nil {
		return
	}
	key := ids.RequestID
	if key == "" {
		key = ids.ID
	}
	c.mu.Lock()
	ch := c.waiting[key]
	c.mu.Unlock()
	if ch != nil {
		select {
		case ch <- m.Payload():
		default:
		}
	}
}

// exchange publishes payload to topic and waits for a reply with id. It
// sends the same payload again (same id) after each retry interval —
// doubling up to 8 s, and never shorter than minWait — until a final reply
// comes (accept says which are final; e.g. busy is not) or ctx ends. On
// ctx's end it returns the last non-final reply, if any, with ctx's error.
func (c *Client) exchange(ctx context.Context, id, topic string, payload []byte, minWait time.Duration,
	accept func([]byte) bool) ([]byte, error) {
	ch := c.register(id)
	defer c.unregister(id)
	interval := c.cfg.RetryInterval
	var last []byte
	for {
		if !c.client.IsConnectionOpen() {
			// Not queued with paho while disconnected: on reconnect paho 1.5.1
			// resends its stored publishes while the queued copy is written
			// too (a data race in its resume); this loop's resend suffices.
			if err := pause(ctx, offlinePoll); err != nil {
				return last, err
			}
			continue
		}
		c.client.Publish(topic, 1, false, payload)
		reply, final, err := c.await(ctx, ch, max(interval, minWait), accept)
		if reply != nil {
			last = reply
		}
		if final {
			return reply, nil
		}
		if err != nil {
			return last, err
		}
		interval = min(2*interval, 8*time.Second)
	}
}

// offlinePoll is how often exchange looks whether a lost connection is back.
const offlinePoll = 20 * time.Millisecond

// pause waits d, or returns ctx's error if ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) register(id string) chan []byte {
	ch := make(chan []byte, 4)
	c.mu.Lock()
	c.waiting[id] = ch
	c.mu.Unlock()
	return ch
}

func (c *Client) unregister(id string) {
	c.mu.Lock()
	delete(c.waiting, id)
	c.mu.Unlock()
}

// await waits up to d for a reply on ch: a final one returns (reply, true,
// nil); a non-final one is kept and waiting goes on; when d passes it
// returns (non-final or nil, false, nil), when ctx ends the same with
// ctx's error.
func (c *Client) await(ctx context.Context, ch chan []byte, d time.Duration, accept func([]byte) bool) ([]byte, bool, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	var nonFinal []byte
	for {
		select {
		case reply := <-ch:
			if accept(reply) {
				return reply, true, nil
			}
			nonFinal = reply
		case <-timer.C:
			return nonFinal, false, nil
		case <-ctx.Done():
			return nonFinal, false, ctx.Err()
		}
	}
}

func randomID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("supervisor: crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}
