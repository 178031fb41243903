package mqttapi_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/lease/mqttapi"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// TestReplyPrefixes: a configured prefix is answered on; a bad one is a
// config error naming it.
func TestReplyPrefixes(t *testing.T) {
	for _, p := range []string{"", "a/#", "x/+/y", "$SYS/"} {
		_, err := mqttapi.New(mqttapi.Config{MQTT: mqtt.Config{Broker: "tcp://127.0.0.1:1"}, ReplyPrefixes: []string{p}})
		if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), p) {
			t.Errorf("reply prefix %q: %v, want lease.ErrConfig naming it", p, err)
		}
	}
	b := mustBroker(t)
	srv, err := mqttapi.New(mqttapi.Config{MQTT: mqtt.Config{Broker: b.URL(), ClientID: "controller"}, ReplyPrefixes: []string{"site/replies/"}})
	if err != nil {
		t.Fatal(err)
	}
	c, _, _ := leasetest.MustController(t, lease.Config{})
	srv.Start(c)
	t.Cleanup(srv.Close)
	waitReady(srv)
	cl := newClient(t, b.URL(), "legacy")
	cl.replyTo = "site/replies/legacy"
	if err := mqtt.Wait(cl.c.Subscribe(cl.replyTo, 1, cl.onReply), waitLong); err != nil {
		t.Fatal(err)
	}
	leasetest.Want(t, cl.Do(t, protocol.OpGet, "press", protocol.Request{RequestID: leasetest.ID()}), protocol.CodeReleased)
}
