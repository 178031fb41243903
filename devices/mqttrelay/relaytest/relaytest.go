// Package relaytest is a simulated Tasmota-like relay controller for tests:
// a real MQTT client (paho) that takes POWER commands on <base>/cmnd/POWER,
// publishes unrelated telemetry first and then its result on
// <base>/stat/RESULT ({"POWER":"ON"}) and <base>/stat/POWER, and keeps
// its LWT (<base>/tele/LWT, Online/Offline, retained).
package relaytest

import (
	"context"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/transport/mqtt"
)

// Options configure a Controller.
type Options struct {
	Broker             string
	ClientID           string // default "relaytest-" + Base with / replaced
	Username, Password string
	// Base is the topic base, e.g. "plug1" or "plant/relays/plug1".
	Base string
}

// Controller is a running simulated controller; its methods are safe for
// concurrent use.
type Controller struct {
	t      testing.TB
	base   string
	client paho.Client

	// replies feeds the responder goroutine: results are published off
	// paho's callback, which must never block (a QoS 1 publish from inside
	// it deadlocks paho's reconnect when the connection drops meanwhile).
	replies   chan string
	responder sync.WaitGroup

	mu       sync.Mutex // guards the fields below
	power    string
	mute     bool
	received []string
	notify   chan struct{} // closed and replaced on every command
}

// Topics of a controller with base b.
func CommandTopic(b string) string { return b + "/cmnd/POWER" }
func ResultTopic(b string) string  { return b + "/stat/RESULT" }
func StateTopic(b string) string   { return b + "/stat/POWER" }
func LWTTopic(b string) string     { return b + "/tele/LWT" }

// Start connects a controller, announces it Online and subscribes to its
// command topic; it disconnects at the test's cleanup.
func Start(t testing.TB, o Options) *Controller {
	t.Helper()
	c := &Controller{t: t, base: o.Base, power: "OFF", notify: make(chan struct{}), replies: make(chan string, 64)}
	id := o.ClientID
	if id == "" {
		id = "relaytest-" + sanitize(o.Base)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := mqtt.Dialer{Config: mqtt.Config{Broker: o.Broker, ClientID: id, Username: o.Username, Password: o.Password},
		Subs:    map[string]paho.MessageHandler{CommandTopic(o.Base): c.onCommand},
		Options: func(opts *paho.ClientOptions) { opts.SetWill(LWTTopic(o.Base), "Offline", 1, true) }}.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.client = cl
	c.responder.Go(c.respond)
	t.Cleanup(func() {
		c.client.Disconnect(100)
		close(c.replies)
		c.responder.Wait()
	})
	c.SetOnline(true)
	return c
}

func sanitize(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == '/' {
			b[i] = '-'
		}
	}
	return string(b)
}

// onCommand applies a POWER command and reports, after telemetry that a
// relay must skip: a result without POWER and a non-JSON line.
func (c *Controller) onCommand(cl paho.Client, m paho.Message) {
	p := string(m.Payload())
	c.mu.Lock()
	c.received = append(c.received, p)
	close(c.notify)
	c.notify = make(chan struct{})
	mute := c.mute
	if p == "ON" || p == "OFF" {
		c.power = p
	}
	power := c.power
	c.mu.Unlock()
	if mute {
		return
	}
	c.replies <- power
}

// respond publishes, in order, what each command makes the controller
// report, until replies is closed. Reports go at QoS 0, as Tasmota sends
// them by default: paho keeps no QoS 0 publish to resend on reconnect,
// where paho 1.5.1 races with the copy still queued (a data race in its
// resume). While disconnected it reports nothing.
func (c *Controller) respond() {
	for power := range c.replies {
		if !c.client.IsConnectionOpen() {
			continue
		}
		c.client.Publish(ResultTopic(c.base), 0, false, `{"Dimmer":30,"Uptime":"0T01:02:03"}`)
		c.client.Publish(ResultTopic(c.base), 0, false, `heap low`)
		c.client.Publish(ResultTopic(c.base), 0, false, `{"POWER":"`+power+`"}`)
		c.client.Publish(StateTopic(c.base), 0, true, power)
	}
}

// SetMute makes the controller take commands without confirming them.
func (c *Controller) SetMute(mute bool) {
	c.mu.Lock()
	c.mute = mute
	c.mu.Unlock()
}

// SetOnline publishes the retained LWT payload Online or Offline (as the
// broker would publish the Will).
func (c *Controller) SetOnline(online bool) {
	c.t.Helper()
	p := "Offline"
	if online {
		p = "Online"
	}
	if err := mqtt.Wait(c.client.Publish(LWTTopic(c.base), 1, true, p), 10*time.Second); err != nil {
		c.t.Fatal(err)
	}
}

// PublishRetained publishes payload retained on topic from the
// controller's client (e.g. a status a broker replays to new subscribers).
func (c *Controller) PublishRetained(topic, payload string) {
	c.t.Helper()
	if err := mqtt.Wait(c.client.Publish(topic, 1, true, payload), 10*time.Second); err != nil {
		c.t.Fatal(err)
	}
}

// Power is the relay's state, "ON" or "OFF".
func (c *Controller) Power() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.power
}

// Received lists every command payload received, in order.
func (c *Controller) Received() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.received...)
}

// WaitReceived waits until n commands have been received and returns them.
func (c *Controller) WaitReceived(n int) []string {
	c.t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		c.mu.Lock()
		got, ch := append([]string(nil), c.received...), c.notify
		c.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-ch:
		case <-deadline:
			c.t.Fatalf("controller %s received %q, want %d commands", c.base, got, n)
		}
	}
}
