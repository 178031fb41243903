package supervisor_test

import (
	"testing"
	"time"

	"github.com/fencegate/fencegate/protocol"
	"go.uber.org/goleak"
)

// TestReconnectDoesNotLeakGoroutines kicks a client off the broker several
// times; after each reconnection it must answer again (its reply
// subscription is back), and once it is closed none of the goroutines its
// reconnections started may be left behind.
func TestReconnectDoesNotLeakGoroutines(t *testing.T) {
	s := startStack(t, 0)
	p := startProxy(t, s.Broker.Addr())
	before := goleak.IgnoreCurrent()
	a := dialNoCleanup(t, "tcp://"+p.addr(), "A")
	for i := range 4 {
		p.kick()
		resp, err := a.LeaseRequest(ctxT(t, 30*time.Second), "plant", protocol.OpGet, protocol.Request{})
		if err != nil {
			t.Fatalf("reconnection %d: %v", i+1, err)
		}
		if resp.Code == "" {
			t.Fatalf("reconnection %d: empty answer %+v", i+1, resp)
		}
	}
	a.Close()
	if err := goleak.Find(before, goleak.IgnoreTopFunction("github.com/eclipse/paho.mqtt.golang.(*router).matchAndDispatch")); err != nil {
		t.Fatal(err)
	}
}
