package mqttrelay

import (
	"fmt"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/transport/mqtt"
)

// Every connection of the relay is a fresh clean session: paho's automatic
// reconnect is off, because after a reconnect it resends the QoS 1
// publishes it still holds unacknowledged, commands the relay has already
// answered. The relay's own loop (maintain) reconnects with Connect, which
// with a clean session empties paho's store instead of resending it.

const (
	// connectWait bounds how long Open waits for the first connection; the
	// client keeps retrying after that, and the device is unavailable
	// meanwhile.
	connectWait = 10 * time.Second
	// reconnectPause is the wait before each reconnect, so a broker that
	// drops the relay at once is not hammered.
	reconnectPause = time.Second
	// quiesce bounds how long a disconnect waits for paho to stop.
	quiesce = 250
)

// connect creates the client, starts maintain and the first connection,
// and waits up to connectWait for it.
func (r *Relay) connect() error {
	mc := mqtt.Config{Broker: r.cfg.Broker, ClientID: r.cfg.ClientID, Username: r.cfg.Username, Password: r.cfg.Password}
	if err := mc.Validate("broker"); err != nil {
		return fmt.Errorf("mqttrelay: %w", err)
	}
	opts, err := mc.ClientOptions(r.onConnect)
	if err != nil {
		return fmt.Errorf("mqttrelay: %w", err)
	}
	opts.SetAutoReconnect(false).SetCleanSession(true)
	opts.SetConnectionLostHandler(func(_ paho.Client, err error) { r.onLost(err) })
	r.client = paho.NewClient(opts)
	go r.maintain()
	r.client.Connect()
	select {
	case <-r.ready:
	case <-time.After(connectWait):
		r.log.Warn("relay not connected yet; the device is unavailable until it is", "broker", mqtt.Redact(r.cfg.Broker))
	}
	return nil
}

// onConnect subscribes to every confirmation topic and the LWT topic. paho
// calls it in its own goroutine after each connection. A failed
// subscription ends the session (maintain tries again).
//
// With an LWT configured, a new session starts with the controller taken
// as offline: what the LWT said before the loss may have changed meanwhile,
// and only the broker's replay of the retained LWT on this session says
// it is online again.
func (r *Relay) onConnect(c paho.Client) {
	if r.cfg.Availability != nil {
		r.update(func() { r.online = false })
	}
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
			r.drop("subscribe failed: " + err.Error())
			return
		}
	}
	r.update(func() { r.connected = true })
	r.once.Do(func() { close(r.ready) })
}

// onLost is paho's connection-lost handler (its own goroutine). A loss
// reported after a newer connection is already open is stale: ignored.
func (r *Relay) onLost(err error) {
	if r.client.IsConnectionOpen() {
		return
	}
	r.log.Warn("relay lost its broker connection", "err", err)
	r.lost("the relay lost its broker connection (" + err.Error() + ")")
}

// drop ends the session the relay gave up on (paho's store of
// unacknowledged publishes goes with it) and has maintain start a fresh
// one. It returns once paho has stopped writing, or after quiesce.
func (r *Relay) drop(why string) {
	r.log.Warn("relay drops its broker session", "why", why)
	r.client.Disconnect(quiesce)
	r.lost("the relay dropped its broker session (" + why + ")")
}

// lost marks the relay disconnected, ends the waiting applies (in doubt)
// and wakes maintain.
func (r *Relay) lost(why string) {
	r.update(func() {
		r.connected = false
		r.loseWaitersLocked(why)
	})
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// maintain is the relay's reconnect loop, owned by the Relay: started by
// connect, stopped by Close (stop), done closed on return.
func (r *Relay) maintain() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case <-r.kick:
		}
		for r.reconnect() {
		}
	}
}

// reconnect waits reconnectPause and connects a fresh session unless one
// is open; it reports whether to try again (paho refused, e.g. while an
// earlier disconnect was still under way). It returns false on stop.
func (r *Relay) reconnect() (again bool) {
	t := time.NewTimer(reconnectPause)
	defer t.Stop()
	select {
	case <-r.stop:
		return false
	case <-t.C:
	}
	if r.client.IsConnectionOpen() {
		return false
	}
	tok := r.client.Connect()
	select {
	case <-r.stop:
		return false
	case <-tok.Done():
	}
	if err := tok.Error(); err != nil {
		r.log.Warn("relay reconnect failed", "err", err)
		return true
	}
	return false
}

// Close stops reconnecting and disconnects the relay's client; waiting
// applies end in doubt and later ones fail device_unavailable. Safe to
// call more than once.
func (r *Relay) Close() error {
	r.closed.Do(func() {
		close(r.stop)
		<-r.done
		r.client.Disconnect(quiesce)
		r.update(func() {
			r.connected = false
			r.loseWaitersLocked("the relay was closed")
		})
	})
	return nil
}
