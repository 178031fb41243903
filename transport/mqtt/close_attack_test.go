package mqtt

// An attack on Embedded.Close (listeners closed from one GetAll snapshot
// before mochi's Server.Close) found it equivalent to mochi's own Close,
// apart from the deadlock it removes. This is its test that held.

import (
	"fmt"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// TestCloseAttackPahoTwoListeners: paho clients on the public (password)
// listener and on the internal listener, some with retained wills, some
// disconnecting during Close. Close must return, and every client must
// lose its connection.
func TestCloseAttackPahoTwoListeners(t *testing.T) {
	users, err := LoadPasswordFile(writePasswordFile(t, bcryptLine(t, "sup", "s3cret")))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		b, err := StartEmbeddedWith(EmbeddedOptions{Addr: "127.0.0.1:0", Users: users})
		if err != nil {
			t.Fatal(err)
		}
		var lost sync.WaitGroup
		var clients []paho.Client
		var gone []*sync.Once
		for i := range 12 {
			cfg := Config{Broker: b.URL(), ClientID: fmt.Sprintf("p%d-%d", round, i), Username: "sup", Password: "s3cret"}
			if i%2 == 1 {
				cfg = Config{Broker: b.InternalURL(), ClientID: fmt.Sprintf("p%d-%d", round, i)}
			}
			opts, err := cfg.ClientOptions(nil)
			if err != nil {
				t.Fatal(err)
			}
			if i%3 == 0 {
				opts.SetWill(fmt.Sprintf("w/%d", i), "gone", 1, true)
			}
			lost.Add(1)
			once := new(sync.Once)
			gone = append(gone, once)
			opts.SetConnectionLostHandler(func(paho.Client, error) { once.Do(lost.Done) })
			c := paho.NewClient(opts.SetAutoReconnect(false).SetConnectRetry(false))
			if err := Wait(c.Connect(), 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := Wait(c.Subscribe("w/#", 1, func(paho.Client, paho.Message) {}), 5*time.Second); err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
		}
		// A third of them leave on their own while Close runs.
		for i, c := range clients {
			if i%3 == 2 {
				go func() { c.Disconnect(0); gone[i].Do(lost.Done) }()
			}
		}
		closed := make(chan error, 1)
		go func() { closed <- b.Close() }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Close hung", round)
		}
		done := make(chan struct{})
		go func() { lost.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: a client still connected after Close", round)
		}
		for _, c := range clients {
			c.Disconnect(0)
		}
	}
}
