package mqtt

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestReconnectStaysDeliverable: a client whose connection drops and
// that connects again at once under the same id must stay in the
// broker's client list — mochi delivers only to listed clients. mochi
// 2.7.9 lets the old connection's teardown, racing with the new
// connection's session take-over, delete the id after the new client
// was added: the new client is connected and subscribed and gets
// nothing.
func TestReconnectStaysDeliverable(t *testing.T) {
	b := startBroker(t, "127.0.0.1:0")
	old := connectRaw(t, b.Addr(), "twice")
	t.Cleanup(func() { old.Close() })
	for round := range 400 {
		next, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		old.Close()
		sendConnect(t, next, "twice")
		old = next
		if !b.awaitListed("twice", 2*time.Second) {
			t.Fatalf("round %d: the client is connected but no longer in the broker's client list", round)
		}
	}
	old.Close()
}

// awaitListed reports whether id is (again) in the broker's client list
// within d, after the teardown of its previous connection had its chance.
func (e *Embedded) awaitListed(id string, d time.Duration) bool {
	time.Sleep(2 * time.Millisecond) // the old connection's teardown runs concurrently
	deadline := time.Now().Add(d)
	for {
		if cl, ok := e.srv.Clients.Get(id); ok && !cl.Closed() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

func connectRaw(t *testing.T, addr, id string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	sendConnect(t, c, id)
	return c
}

// sendConnect sends a clean-session MQTT 3.1.1 CONNECT for id and reads
// its CONNACK.
func sendConnect(t *testing.T, c net.Conn, id string) {
	t.Helper()
	body := append([]byte{0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, byte(len(id))}, id...)
	if _, err := c.Write(append([]byte{0x10, byte(len(body))}, body...)); err != nil {
		t.Fatal(err)
	}
	ack := make([]byte, 4)
	if _, err := io.ReadFull(c, ack); err != nil || ack[0] != 0x20 || ack[3] != 0 {
		t.Fatalf("CONNACK %x, %v", ack, err)
	}
}
