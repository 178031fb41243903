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

	closed     chan struct{} // closed by Close: leases stop renewing
	subscribed chan error    // one slot: the first connection's subscribe outcome, for Dial
}

// subscribeTimeout bounds each wait for the broker to acknowledge the
// reply subscription.
const subscribeTimeout = 10 * time.Second

// Dial connects to the broker and subscribes to this client's reply
// topic, Topics.ReplyTopic(client id) in the reply namespace (and its
// subtopics), so agents and controllers accept it as reply_to. It returns
// once the broker acknowledged that subscription, or ctx's error.
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
		watches: map[string]*stateWatch{}, closed: make(chan struct{}), subscribed: make(chan error, 1)}
	c.reply = c.topics.ReplyTopic(cfg.MQTT.ClientID)
	opts, err := cfg.MQTT.ClientOptions(c.onConnect)
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	c.client = paho.NewClient(opts)
	c.client.Connect()
	select {
	case err := <-c.subscribed:
		if err != nil {
			c.client.Disconnect(0)
			return nil, fmt.Errorf("supervisor: subscribe: %w", err)
		}
		return c, nil
	case <-ctx.Done():
		c.client.Disconnect(0)
		return nil, fmt.Errorf("supervisor: connect to %s: %w", cfg.MQTT.Broker, ctx.Err())
	}
}

// onConnect runs in a paho goroutine after every (re)connection: it
// subscribes to the reply topic (and its subtopics) and waits for the
// broker's answer, at most subscribeTimeout and never past Close. Only the
// first connection's outcome is reported (to Dial); later ones are
// dropped, so a reconnection never leaves a goroutine blocked.
func (c *Client) onConnect(pc paho.Client) {
	t := pc.Subscribe(c.reply+"/#", 1, c.onReply)
	timer := time.NewTimer(subscribeTimeout)
	defer timer.Stop()
	var err error
	select {
	case <-t.Done():
		err = t.Error()
	case <-timer.C:
		err = fmt.Errorf("no answer from the broker in %v", subscribeTimeout)
	case <-c.closed:
		err = errors.New("client closed")
	}
	select {
	case c.subscribed <- err:
	default:
	}
	c.resubscribeStates(pc)
}

// resubscribeStates renews WaitHandover's state subscriptions after a
// reconnection (the session is clean); a retained state comes again.
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
// but not released: use Lease.Release first for a prompt hand-over. Close
// is called once.
func (c *Client) Close() {
	close(c.closed)
	c.client.Disconnect(250)
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
