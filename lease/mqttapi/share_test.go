package mqttapi_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/lease/mqttapi"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// counting answers every request "released" and counts them.
type counting struct{ n atomic.Int64 }

func (c *counting) Do(_ context.Context, _ protocol.LeaseOp, _ string, req protocol.Request) protocol.Response {
	c.n.Add(1)
	return protocol.Response{RequestID: req.RequestID, OK: true, Code: protocol.CodeReleased}
}

// TestShareGroup: replicas in one share group handle each request once
// between them; without a group both would handle every request.
func TestShareGroup(t *testing.T) {
	b := mustBroker(t)
	var handlers [2]counting
	var servers [2]*mqttapi.Server
	for i := range servers {
		srv, err := mqttapi.New(mqttapi.Config{MQTT: mqtt.Config{Broker: b.URL(), ClientID: "replica" + string(rune('a'+i))}, ShareGroup: "controllers"})
		if err != nil {
			t.Fatal(err)
		}
		srv.Start(&handlers[i])
		defer srv.Close()
		servers[i] = srv
	}
	waitReady(servers[:]...)
	cl := newClient(t, b.URL(), "share-tester")
	const n = 40
	for range n {
		leasetest.Want(t, cl.Do(t, protocol.OpGet, "d", protocol.Request{RequestID: leasetest.ID()}), protocol.CodeReleased)
	}
	for _, s := range servers {
		s.Close() // waits for every handler: the counts are final
	}
	if got := handlers[0].n.Load() + handlers[1].n.Load(); got != n {
		t.Fatalf("%d requests handled by the two replicas (%d + %d), want %d", got, handlers[0].n.Load(), handlers[1].n.Load(), n)
	}
}

func TestShareGroupInvalid(t *testing.T) {
	_, err := mqttapi.New(mqttapi.Config{MQTT: mqtt.Config{Broker: "tcp://127.0.0.1:1"}, ShareGroup: "a/b"})
	if !errors.Is(err, lease.ErrConfig) {
		t.Fatalf("share group with a slash: %v, want lease.ErrConfig", err)
	}
}

func waitReady(servers ...*mqttapi.Server) {
	for _, s := range servers {
		for !s.Ready() {
			time.Sleep(5 * time.Millisecond)
		}
	}
}
