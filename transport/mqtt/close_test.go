package mqtt

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// TestCloseWhileClientsDisconnect closes the broker again and again while
// its clients drop their connections. mochi's own listener close takes the
// client list's read lock twice over, and a disconnect arriving in between
// deadlocked it for good (mochi-mqtt/server issue 488); Close must not.
func TestCloseWhileClientsDisconnect(t *testing.T) {
	for round := range 600 {
		b, err := StartEmbedded("127.0.0.1:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		conns := rawConnect(t, b.Addr(), 30, round)
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Go(func() { c.Close() })
		}
		closed := make(chan error, 1)
		go func() { closed <- b.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: Close did not return while clients disconnected (deadlock)", round)
		}
		wg.Wait()
	}
}

// rawConnect opens n clean-session MQTT 3.1.1 connections and waits for
// each CONNACK.
func rawConnect(t *testing.T, addr string, n, round int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		sendConnect(t, c, fmt.Sprintf("c%d-%d", round, i))
		conns = append(conns, c)
	}
	return conns
}
