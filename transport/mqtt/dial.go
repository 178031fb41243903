package mqtt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// errDisconnected ends a subscription wait cut short by Disconnect.
var errDisconnected = errors.New("mqtt: client disconnected")

// subscribeFailed is the granted-QoS value of a refused subscription.
const subscribeFailed = 0x80

// Dialer connects a paho client that subscribes its filters again on
// every (re)connection, as a clean session needs. Zero values of the
// optional fields mean "none".
type Dialer struct {
	// Config reaches the broker; Config.Broker is required.
	Config Config
	// Subs maps topic filters to their handlers, subscribed at QoS 1 after
	// each connection. Handlers run in paho's goroutines and must not block.
	Subs map[string]paho.MessageHandler
	// Options, if set, adjusts the client options (a Will, ack settings)
	// before the client is made. The on-connect handler it may set is
	// replaced by the Dialer's own.
	Options func(*paho.ClientOptions)
	// OnSubscribed, if set, runs after each connection's subscriptions
	// were acknowledged (err nil) or failed, in paho's on-connect
	// goroutine; the client's Disconnect waits for it, so it must neither
	// block for long nor call Disconnect.
	OnSubscribed func(c paho.Client, err error)
}

// Dial is Dialer{Config: cfg, Subs: subs}.Dial(ctx).
func Dial(ctx context.Context, cfg Config, subs map[string]paho.MessageHandler) (paho.Client, error) {
	return Dialer{Config: cfg, Subs: subs}.Dial(ctx)
}

// Dial connects and returns once the first connection's subscriptions
// are acknowledged by the broker. It fails, leaving nothing running, if
// the broker refuses one of them, does not answer within the connect
// timeout, or ctx ends first. Later connections subscribe again, each
// wait bounded by the connect timeout (Config.ConnectTimeout, default
// 10 s) and cut short by Disconnect. The returned client's Disconnect
// waits for the subscribing goroutine of every connection; it is called
// once, and the client is not connected again.
func (d Dialer) Dial(ctx context.Context) (paho.Client, error) {
	opts, err := d.Config.ClientOptions(nil)
	if err != nil {
		return nil, err
	}
	if d.Options != nil {
		d.Options(opts)
	}
	c := &dialed{d: d, first: make(chan error, 1), stop: make(chan struct{}),
		timeout: orDefault(d.Config.ConnectTimeout, 10*time.Second)}
	c.Client = paho.NewClient(opts.SetOnConnectHandler(c.onConnect))
	c.connect = c.Client.Connect()
	select {
	case err = <-c.first:
	case <-ctx.Done():
		err = fmt.Errorf("mqtt: connect to %s: %w", d.Config.Broker, ctx.Err())
	}
	if err != nil {
		c.Disconnect(0)
		return nil, err
	}
	return c, nil
}

// dialed is a paho client whose Disconnect also waits for the
// subscribing on-connect goroutines.
type dialed struct {
	paho.Client
	d       Dialer
	timeout time.Duration // bounds each connection's wait for its subscriptions
	first   chan error    // one slot: the first connection's outcome, for Dial
	connect paho.Token    // the first Connect: done once paho stopped trying
	stop    chan struct{} // closed by Disconnect: ends subscription waits

	mu      sync.Mutex     // guards stopped and the calls to wg.Add
	stopped bool           // set by Disconnect: later on-connects do nothing
	wg      sync.WaitGroup // the on-connect goroutines running
}

// onConnect runs in a paho goroutine after every connection: it
// subscribes every filter and reports the outcome — the first to Dial
// (later ones are dropped, so no reconnection leaves a goroutine
// blocked), every one to OnSubscribed.
func (c *dialed) onConnect(pc paho.Client) {
	if !c.enter() {
		return
	}
	defer c.wg.Done()
	err := c.subscribe(pc)
	select {
	case c.first <- err:
	default:
	}
	if c.d.OnSubscribed != nil {
		c.d.OnSubscribed(pc, err)
	}
}

// enter counts an on-connect goroutine in, unless Disconnect began.
func (c *dialed) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	c.wg.Add(1)
	return true
}

// subscribe sends every subscription, then waits for each answer.
func (c *dialed) subscribe(pc paho.Client) error {
	tokens := make(map[string]paho.Token, len(c.d.Subs))
	for filter, h := range c.d.Subs {
		tokens[filter] = pc.Subscribe(filter, 1, h)
	}
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	for filter, t := range tokens {
		if err := c.await(t, timer.C); err != nil {
			return fmt.Errorf("mqtt: subscribe %s: %w", filter, err)
		}
	}
	return nil
}

// await waits for one subscription's answer, until timeout fires or
// Disconnect; a refusal by the broker is an error.
func (c *dialed) await(t paho.Token, timeout <-chan time.Time) error {
	select {
	case <-t.Done():
	case <-timeout:
		return fmt.Errorf("no answer from the broker in %v", c.timeout)
	case <-c.stop:
		return errDisconnected
	}
	if err := t.Error(); err != nil {
		return err
	}
	if st, ok := t.(*paho.SubscribeToken); ok {
		for _, qos := range st.Result() {
			if qos == subscribeFailed {
				return errors.New("refused by the broker")
			}
		}
	}
	return nil
}

// Disconnect ends subscription waits, disconnects (waiting up to quiesce
// milliseconds for work in flight) and waits for every on-connect
// goroutine, and for paho's first connection attempt if it was still
// trying (at most a connect timeout and a retry interval). It must not be
// called from OnSubscribed.
func (c *dialed) Disconnect(quiesce uint) {
	c.mu.Lock()
	first := !c.stopped
	c.stopped = true
	c.mu.Unlock()
	if first {
		close(c.stop)
	}
	c.Client.Disconnect(quiesce)
	c.connect.WaitTimeout(c.timeout + connectRetryInterval)
	c.wg.Wait()
}
