package mqttapi_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/lease/mqttapi"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// TestRetainedGrantsCanBeErased (issue 11 item 11): an empty retained
// publish clears a live lease's grant topic while the controller is down;
// the restarted controller re-announces the lease from its store, and
// heals the topic again when it is cleared while it runs.
func TestRetainedGrantsCanBeErased(t *testing.T) {
	b := mustBroker(t)
	w := watchGrants(t, b.URL())
	path := filepath.Join(t.TempDir(), "leases.db")
	signer, _ := leasetest.MustSigner(t)
	stop := startOn(t, b.URL(), path, signer)
	r := leasetest.Acquire(t, stop.client, "press", "alice", time.Hour)
	leasetest.Want(t, r, protocol.CodeGranted)
	w.waitLast(t, r.Token)
	stop.close()

	intruder := connect(t, b.URL(), "intruder")
	w.reset()
	publishRetained(t, intruder, nil)
	if got := w.waitLast(t, "(undecodable)"); got != "(undecodable)" {
		t.Fatalf("the empty retained publish was not seen: last grant %q", got)
	}
	w.reset()
	restarted := startOn(t, b.URL(), path, signer)
	defer restarted.close()
	if got := w.waitLast(t, r.Token); got != r.Token {
		t.Fatalf("after the restart the grant topic holds %.40q, want the live lease re-announced", got)
	}
	w.reset()
	publishRetained(t, intruder, nil)
	w.waitSeen(t, r.Token) // the heal may overtake the empty publish on its way to w (see TestRetainedGrantHeals)
	if got := readRetainedGrant(t, b.URL()); got != r.Token {
		t.Fatalf("a cleared grant topic was not healed while running: the broker retains %.40q", got)
	}
}

// running is a controller with its MQTT API on a bbolt file.
type running struct {
	client leasetest.Direct
	close  func()
}

// startOn starts a controller on the store at path and its MQTT API, and
// returns once the API is ready.
func startOn(t *testing.T, broker, path string, signer *fence.Signer) running {
	t.Helper()
	r := startController(t, broker, path, signer, false)
	waitReady(r.srv)
	return r.running
}

// started is a controller on a bbolt store with its MQTT API.
type started struct {
	running
	st  *boltstore.Store
	srv *mqttapi.Server
}

// startController opens the store at path and starts a controller signing
// with signer (withFloor: with its MQTT API as its EpochFloor) and that API
// on broker, without waiting for the API to be ready.
func startController(t *testing.T, broker, path string, signer *fence.Signer, withFloor bool) started {
	t.Helper()
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mqttapi.New(mqttapi.Config{MQTT: mqtt.Config{Broker: broker, ClientID: "controller"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := lease.Config{Signer: signer, OnGrant: srv.Announce}
	if withFloor {
		cfg.EpochFloor = srv
	}
	c, _ := leasetest.MustControllerOn(t, cfg, st)
	srv.Start(c)
	return started{st: st, srv: srv, running: running{client: leasetest.Direct{C: c}, close: func() {
		srv.Close()
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}}}
}

// mustBroker starts an embedded broker, closed at the end of the test
// (registered first, so it runs after the clients' cleanups).
func mustBroker(t *testing.T) *mqtt.Embedded {
	t.Helper()
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
