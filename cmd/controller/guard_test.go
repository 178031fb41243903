package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// TestServeGuards: the controller process wires the epoch floor (a
// retained grant above its store's epoch refuses the grant, naming
// epoch-bump) and the domains allow-list.
func TestServeGuards(t *testing.T) {
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	dir := t.TempDir()
	if err := keygen(dir, false, nopWriter{}); err != nil {
		t.Fatal(err)
	}
	priv, err := fence.LoadPrivateKey(filepath.Join(dir, "controller.key"))
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := fence.NewSigner(priv)
	future := uint64(time.Now().Add(1000 * time.Hour).UnixMilli())
	tok, err := signer.Sign(fence.Token{Domain: "press", Epoch: future, Seq: 1, Holder: "h", IssuedAt: 1, TTLms: 1000})
	if err != nil {
		t.Fatal(err)
	}
	publishRetainedGrant(t, b.URL(), tok)
	p := startChild(t, "--data-dir", filepath.Join(dir, "data"), "--key", filepath.Join(dir, "controller.key"),
		"--http", "127.0.0.1:0", "--mqtt", b.URL(), "--domains", "press,oven-*")
	hc := &http.Client{Timeout: 30 * time.Second}
	acquire := func(domain string) protocol.Response {
		r, err := post(hc, p.url+"/v1/leases/"+domain+"/acquire", protocol.Request{RequestID: "r-" + domain, Holder: "alice", TTLms: 60000})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := acquire("press"); r.Code != protocol.CodeInternal || !strings.Contains(r.Message, "epoch-bump") {
		t.Fatalf("acquire below a retained grant's epoch: %+v, want internal naming epoch-bump", r)
	}
	if r := acquire("oven-1"); r.Code != protocol.CodeGranted {
		t.Fatalf("acquire of an allowed domain: %+v", r)
	}
	if r := acquire("mill"); r.Code != protocol.CodeBadRequest || !strings.Contains(r.Message, "oven-*") {
		t.Fatalf("acquire outside the domains setting: %+v, want bad_request naming the patterns", r)
	}
	if err := p.kill(t, syscall.SIGTERM); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

func publishRetainedGrant(t *testing.T, broker string, tok fence.Token) {
	t.Helper()
	opts, _ := mqtt.Config{Broker: broker, ClientID: "old-timeline"}.ClientOptions(nil)
	c := paho.NewClient(opts)
	if err := mqtt.Wait(c.Connect(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(50)
	payload, _ := json.Marshal(protocol.Grant{Token: tok.Raw})
	if err := mqtt.Wait(c.Publish(protocol.Topics{}.LeaseGrant(tok.Domain), 1, true, payload), 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

type nopWriter struct{}

func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }
