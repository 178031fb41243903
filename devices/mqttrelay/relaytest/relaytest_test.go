package relaytest

import (
	"errors"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"

	"github.com/fencegate/fencegate/transport/mqtt"
)

// TestStartResubscribesWithoutLeakOnReconnect: a controller the broker
// drops reconnects and takes commands again, and once the test is over
// none of its reconnections left a goroutine behind (the first
// subscription's outcome is reported once; later ones must not block).
func TestStartResubscribesWithoutLeakOnReconnect(t *testing.T) {
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	before := goleak.IgnoreCurrent()
	t.Run("reconnect", func(t *testing.T) {
		c := Start(t, Options{Broker: b.URL(), Base: "plug1"})
		pub, err := mqtt.Dial(t.Context(), mqtt.Config{Broker: b.URL(), ClientID: "pub"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Disconnect(100)
		for range 3 {
			kick(t, b, "relaytest-plug1")
			sendUntilReceived(t, pub, c)
		}
	})
	if err := goleak.Find(before, goleak.IgnoreTopFunction("github.com/eclipse/paho.mqtt.golang.(*router).matchAndDispatch")); err != nil {
		t.Fatal(err)
	}
}

// kick makes the broker drop client id's connection.
func kick(t *testing.T, b *mqtt.Embedded, id string) {
	t.Helper()
	cl, ok := b.Server().Clients.Get(id)
	if !ok {
		t.Fatalf("client %s is not on the broker", id)
	}
	cl.Stop(errors.New("kicked by the test"))
}

// sendUntilReceived sends ON until the controller has received one more
// command: its resubscription is not observable from outside, so a
// command sent before it is lost and sent again.
func sendUntilReceived(t *testing.T, pub paho.Client, c *Controller) {
	t.Helper()
	n := len(c.Received()) + 1
	deadline := time.Now().Add(15 * time.Second)
	for len(c.Received()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("controller received %q, want %d commands", c.Received(), n)
		}
		if err := mqtt.Wait(pub.Publish(CommandTopic("plug1"), 1, false, "ON"), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		c.waitNotify(200 * time.Millisecond)
	}
}

// waitNotify waits up to d for the controller's next command.
func (c *Controller) waitNotify(d time.Duration) {
	c.mu.Lock()
	ch := c.notify
	c.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(d):
	}
}
