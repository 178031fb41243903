package httpapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/goleak"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/httpapi"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/lease/metrics"
	"github.com/fencegate/fencegate/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type client struct{ url string }

// Do sends op over HTTP; a transport error fails t.
func (c client) Do(t testing.TB, op protocol.LeaseOp, domain string, req protocol.Request) protocol.Response {
	var resp *http.Response
	var err error
	if op == protocol.OpGet {
		resp, err = http.Get(c.url + "/v1/leases/" + domain)
	} else {
		body, _ := json.Marshal(req)
		resp, err = http.Post(c.url+"/v1/leases/"+domain+"/"+string(op), "application/json", bytes.NewReader(body))
	}
	if err != nil {
		t.Error(err)
		return protocol.Response{}
	}
	defer resp.Body.Close()
	var r protocol.Response
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Errorf("decode: %v", err)
	}
	if want := wantStatus(r); resp.StatusCode != want {
		t.Errorf("status %d for %+v, want %d", resp.StatusCode, r, want)
	}
	return r
}

func wantStatus(r protocol.Response) int {
	switch {
	case r.OK:
		return 200
	case r.Code == protocol.CodeBadRequest:
		return 400
	case r.Code == protocol.CodeInternal:
		return 500
	}
	return 409
}

func start(t *testing.T, ready func() error) (leasetest.Env, string) {
	clock := leasetest.NewClock()
	reg := prometheus.NewRegistry()
	var c *lease.Controller
	m := metrics.New(reg, func() int { return c.ActiveLeases() })
	metrics.RegisterDomains(reg, func() int { return c.Domains() })
	c, _, keys := leasetest.MustController(t, lease.Config{Clock: clock, Observer: m})
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Controller: c, Ready: ready, Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}))
	t.Cleanup(srv.Close)
	return leasetest.Env{Client: client{srv.URL}, Clock: clock, Keys: keys}, srv.URL
}

func TestScenariosHTTP(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) leasetest.Env { e, _ := start(t, nil); return e })
}

func TestBadInputHTTP(t *testing.T) {
	e, url := start(t, nil)
	held := leasetest.Verified(t, e, leasetest.Acquire(t, e.Client, "d", "alice", time.Minute))
	tests := []struct{ name, path, body string }{
		{"malformed json", "/v1/leases/d/acquire", `{"holder":`},
		{"wrong type", "/v1/leases/d/acquire", `{"request_id":"r","holder":"bob","ttl_ms":"x"}`},
		{"ttl out of range", "/v1/leases/d/acquire", `{"request_id":"r","holder":"bob","ttl_ms":50}`},
		{"missing holder", "/v1/leases/d/acquire", `{"request_id":"r","ttl_ms":1000}`},
		{"bad domain", "/v1/leases/d%20x/acquire", `{"request_id":"r","holder":"bob","ttl_ms":1000}`},
		{"unknown op", "/v1/leases/d/steal", `{"request_id":"r","holder":"bob","ttl_ms":1000}`},
		{"get by post", "/v1/leases/d/get", `{}`},
		{"oversize", "/v1/leases/d/acquire", `{"request_id":"r","holder":"bob","ttl_ms":1000,"x":"` + strings.Repeat("x", protocol.MaxRequestBytes) + `"}`},
		{"bad token", "/v1/leases/d/release", `{"token":"fg1.x.y"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(url+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var r protocol.Response
			if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 400 ||
				r.Code != protocol.CodeBadRequest || r.Message == "" {
				t.Fatalf("status %d, %+v, %v; want 400 bad_request with a message", resp.StatusCode, r, err)
			}
			g := e.Client.Do(t, protocol.OpGet, "d", protocol.Request{})
			if g.Code != protocol.CodeHeld || g.Token != held.Raw {
				t.Fatalf("state changed: %+v", g)
			}
		})
	}
}

func TestKeysHealthMetrics(t *testing.T) {
	notReady := errors.New("broker down")
	var readyErr error = notReady
	e, url := start(t, func() error { return readyErr })
	tok := leasetest.Verified(t, e, leasetest.Acquire(t, e.Client, "d", "alice", time.Minute))
	leasetest.Want(t, leasetest.Acquire(t, e.Client, "d", "bob", time.Minute), protocol.CodeHeld)

	var keys struct {
		Epoch uint64
		Keys  []httpapi.Key
	}
	getJSON(t, url+"/v1/keys", &keys)
	if len(keys.Keys) != 1 || keys.Keys[0].ID != tok.KeyID.String() || !keys.Keys[0].Signing ||
		!strings.Contains(keys.Keys[0].Public, "BEGIN PUBLIC KEY") || keys.Epoch != tok.Epoch {
		t.Fatalf("keys: %+v, want the key %s of epoch %d", keys, tok.KeyID, tok.Epoch)
	}
	if code, _ := getText(t, url+"/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	if code, body := getText(t, url+"/readyz"); code != 503 || !strings.Contains(body, "broker down") {
		t.Fatalf("readyz while not ready: %d %q", code, body)
	}
	readyErr = nil
	if code, _ := getText(t, url+"/readyz"); code != 200 {
		t.Fatalf("readyz %d", code)
	}
	_, body := getText(t, url+"/metrics")
	for _, want := range []string{"fencegate_lease_active 1", "fencegate_lease_domains 1", `fencegate_lease_denials_total{code="held"} 1`,
		`fencegate_lease_request_duration_seconds_count{op="acquire"} 2`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func getJSON(t *testing.T, url string, v any) {
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func getText(t *testing.T, url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
