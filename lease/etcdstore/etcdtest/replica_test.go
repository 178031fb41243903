package etcdtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/etcdstore"
	"github.com/fencegate/fencegate/lease/httpapi"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/lease/mqttapi"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// replica is one controller process: an etcd store, a controller, its
// HTTP API and its MQTT API in the share group.
type replica struct {
	store *etcdstore.Store
	ctrl  *lease.Controller
	http  *http.Server
	url   string
	mqtt  *mqttapi.Server
	done  chan struct{} // closed when http.Serve returned
}

// startReplica starts a replica on c's etcd and broker URL.
func startReplica(t *testing.T, c *Cluster, prefix, brokerURL, name string, signer *fence.Signer) *replica {
	t.Helper()
	st, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: c.Endpoints(), Prefix: prefix,
		RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := mqttapi.New(mqttapi.Config{MQTT: mqtt.Config{Broker: brokerURL, ClientID: name}, ShareGroup: "controllers"})
	if err != nil {
		t.Fatal(err)
	}
	ctrl, _ := leasetest.MustControllerOn(t, lease.Config{Signer: signer, OnGrant: ms.Announce}, st)
	ms.Start(ctrl)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{store: st, ctrl: ctrl, mqtt: ms, url: "http://" + ln.Addr().String(), done: make(chan struct{}),
		http: &http.Server{Handler: httpapi.New(httpapi.Config{Controller: ctrl, Ready: st.Err}), ReadHeaderTimeout: 10 * time.Second}}
	go func() { defer close(r.done); r.http.Serve(ln) }()
	t.Cleanup(r.kill)
	for !ms.Ready() {
		time.Sleep(5 * time.Millisecond)
	}
	return r
}

// kill stops the replica abruptly: open HTTP connections are cut, the MQTT
// API ends its waiting acquires and disconnects, the store is closed.
func (r *replica) kill() {
	r.http.Close()
	<-r.done
	r.mqtt.Close()
	r.store.Close()
}

// httpDo runs one operation through a replica's HTTP API. A transport
// failure (a killed replica) is returned, not fatal.
func httpDo(ctx context.Context, cl *http.Client, base string, op protocol.LeaseOp, domain string, req protocol.Request) (protocol.Response, error) {
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/v1/leases/%s/%s", base, domain, op), bytes.NewReader(body))
	if err != nil {
		return protocol.Response{}, err
	}
	resp, err := cl.Do(hr)
	if err != nil {
		return protocol.Response{}, err
	}
	defer resp.Body.Close()
	var r protocol.Response
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return protocol.Response{}, fmt.Errorf("decode response (status %d): %w", resp.StatusCode, err)
	}
	return r, nil
}
