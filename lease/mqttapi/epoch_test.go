package mqttapi_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// TestEpochFromWrongClock (issue 11 item 9, observed epochs): a controller
// whose store epoch is below a retained grant's (or an agent's retained
// device state's) never issues a token that sorts below it: it refuses,
// naming epoch-bump, and changes nothing; after the bump it grants above.
func TestEpochFromWrongClock(t *testing.T) {
	b := mustBroker(t)
	path := filepath.Join(t.TempDir(), "leases.db")
	st, err := boltstore.Open(path, boltstore.Options{Epoch: 1000})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	signer, _ := leasetest.MustSigner(t)
	intruder := connect(t, b.URL(), "old-timeline")
	old, err := signer.Sign(fence.Token{Domain: "press", Epoch: 5000, Seq: 3, Holder: "h", IssuedAt: 1, TTLms: 1000})
	if err != nil {
		t.Fatal(err)
	}
	publishRetained(t, intruder, grantJSON(old.Raw))

	ctl := startObserving(t, b.URL(), path, signer)
	wantRefused(t, ctl, "press")
	if rec := ctl.load(t, "press"); rec.Version != 0 {
		t.Fatalf("a refused grant changed the store: %+v", rec)
	}
	other := leasetest.Acquire(t, ctl.client, "other", "alice", time.Minute) // nothing seen there
	leasetest.Want(t, other, protocol.CodeGranted)
	ctl.close()

	// An agent's state naming its domain bounds that domain only: its
	// seq 50 is above this store's next seq there.
	publishState(t, intruder, protocol.DeviceState{Device: "pump2", Domain: "line", Agent: "gw1", Online: true, Fence: &fence.Fence{Epoch: 1000, Seq: 50, Holder: "h"}})
	ctl = startObserving(t, b.URL(), path, signer)
	wantRefused(t, ctl, "line")
	leasetest.Want(t, leasetest.Acquire(t, ctl.client, "spare", "alice", time.Minute), protocol.CodeGranted)
	ctl.close()

	// A state naming no domain (an older agent) bounds every domain.
	publishState(t, intruder, protocol.DeviceState{Device: "pump1", Agent: "gw1", Online: true, Fence: &fence.Fence{Epoch: 7000, Seq: 1, Holder: "h"}})
	ctl = startObserving(t, b.URL(), path, signer)
	wantRefused(t, ctl, "fresh")
	ctl.close()

	if _, _, err := boltstore.BumpEpoch(path, time.UnixMilli(7001), time.Second); err != nil {
		t.Fatal(err)
	}
	ctl = startObserving(t, b.URL(), path, signer)
	defer ctl.close()
	for _, d := range []string{"press", "fresh", "line"} {
		r := leasetest.Acquire(t, ctl.client, d, "bob", time.Minute)
		leasetest.Want(t, r, protocol.CodeGranted)
		tok, _ := fence.ParseUnverified(r.Token)
		if fence.ComparePosition(tok.Epoch, tok.Seq, 7000, 1) <= 0 || fence.ComparePosition(tok.Epoch, tok.Seq, old.Epoch, old.Seq) <= 0 {
			t.Fatalf("after the bump %s granted %d/%d, not above what was seen", d, tok.Epoch, tok.Seq)
		}
	}
}

func publishState(t *testing.T, c paho.Client, st protocol.DeviceState) {
	t.Helper()
	payload, _ := json.Marshal(st)
	if err := mqtt.Wait(c.Publish(protocol.Topics{}.DeviceState(st.Device), 1, true, payload), waitLong); err != nil {
		t.Fatal(err)
	}
}

func wantRefused(t *testing.T, ctl observing, domain string) {
	t.Helper()
	r := leasetest.Acquire(t, ctl.client, domain, "bob", time.Minute)
	if r.Code == protocol.CodeGranted || !strings.Contains(r.Message, "epoch-bump") {
		t.Fatalf("acquire of %s below a seen epoch: %+v, want a refusal naming epoch-bump", domain, r)
	}
}

// observing is a controller whose grants are checked against what its
// MQTT API sees.
type observing struct{ started }

func (o observing) load(t *testing.T, domain string) lease.Record {
	rec, err := o.st.Load(context.Background(), domain)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// startObserving starts a controller on the store at path with its MQTT
// API as its EpochFloor, and returns at once (the first grants wait for
// the broker's retained messages).
func startObserving(t *testing.T, broker, path string, signer *fence.Signer) observing {
	t.Helper()
	return observing{startController(t, broker, path, signer, true)}
}
