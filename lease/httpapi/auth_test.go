package httpapi_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/internal/httpauth"
	"github.com/fencegate/fencegate/internal/logtest"
	"github.com/fencegate/fencegate/internal/tlstest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/httpapi"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/protocol"
)

const line1Token = "line1-sup:0123456789abcdef0123"

// authServer serves a controller over mutual TLS (client certificates
// optional at the TLS layer) with a token file and a two-team policy.
func authServer(t *testing.T) (*httptest.Server, *tlstest.CA, *logtest.Recorder) {
	ca := tlstest.NewCA(t, "plant")
	srvPair := ca.Server("controller")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("# team tokens\n"+line1Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := httpauth.Config{TokenFile: tokens, TLS: httpauth.ServerTLS{Cert: srvPair.Cert, Key: srvPair.Key, ClientCA: ca.CAFile}}
	rec := logtest.New()
	auth, err := httpauth.New(cfg, "http_auth", rec.Logger())
	if err != nil {
		t.Fatal(err)
	}
	tc, err := cfg.ServerConfig("http_auth")
	if err != nil {
		t.Fatal(err)
	}
	policy := httpapi.Policy{
		{Identity: "line1-sup", Domains: []string{"line1-*"}},
		{Identity: "line2-sup", Domains: []string{"line2-*"}, Holders: []string{"line2-*"}},
	}
	if err := policy.Validate("authz"); err != nil {
		t.Fatal(err)
	}
	c, _, _ := leasetest.MustController(t, lease.Config{Clock: leasetest.NewClock()})
	srv := httptest.NewUnstartedServer(httpapi.New(httpapi.Config{Controller: c, Auth: auth, Policy: policy, Logger: rec.Logger()}))
	srv.TLS = tc
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, ca, rec
}

// httpsClient trusts ca and presents pair's certificate if given.
func httpsClient(t *testing.T, ca *tlstest.CA, pair *tlstest.Pair) *http.Client {
	pem, err := os.ReadFile(ca.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tc := &tls.Config{RootCAs: roots}
	if pair != nil {
		cert, err := tls.LoadX509KeyPair(pair.Cert, pair.Key)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
}

func post(t *testing.T, c *http.Client, url, bearer string, req protocol.Request) (int, protocol.Response) {
	t.Helper()
	body, _ := json.Marshal(req)
	r, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if bearer != "" {
		r.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out protocol.Response
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestAuthAndPolicyHTTP(t *testing.T) {
	srv, ca, rec := authServer(t)
	anon := httpsClient(t, ca, nil)
	line2 := ca.Client("line2-sup")
	line2c := httpsClient(t, ca, &line2)
	foreign := tlstest.NewCA(t, "elsewhere").Client("line1-sup")
	acq := func(holder string) protocol.Request {
		return protocol.Request{RequestID: "r-" + holder, Holder: holder, TTLms: 60000}
	}
	_, granted := post(t, anon, srv.URL+"/v1/leases/line1-press/acquire", "0123456789abcdef0123", acq("line1-sup"))
	tests := []struct {
		name   string
		client *http.Client
		bearer string
		path   string
		req    protocol.Request
		status int
		code   protocol.Code
	}{
		{"no credential", anon, "", "/v1/leases/line1-a/acquire", acq("line1-sup"), 401, ""},
		{"wrong token", anon, "0123456789abcdef0124", "/v1/leases/line1-a/acquire", acq("line1-sup"), 401, ""},
		{"certificate of another CA", httpsClient(t, ca, &foreign), "", "/v1/leases/line1-a/acquire", acq("line1-sup"), 0, ""},
		{"token, own domain", anon, "0123456789abcdef0123", "/v1/leases/line1-a/acquire", acq("line1-sup"), 200, protocol.CodeGranted},
		{"token, other team's domain", anon, "0123456789abcdef0123", "/v1/leases/line2-a/acquire", acq("line1-sup"), 403, protocol.CodeNotHolder},
		{"token, other team's holder", anon, "0123456789abcdef0123", "/v1/leases/line1-b/acquire", acq("line2-x"), 403, protocol.CodeBadRequest},
		{"certificate, own domain and holder", line2c, "", "/v1/leases/line2-a/acquire", acq("line2-robot"), 200, protocol.CodeGranted},
		{"certificate, other team's domain", line2c, "", "/v1/leases/line1-c/acquire", acq("line2-robot"), 403, protocol.CodeNotHolder},
		{"certificate, release other team's lease", line2c, "", "/v1/leases/line1-press/release", protocol.Request{Token: granted.Token}, 403, protocol.CodeNotHolder},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.status == 0 {
				body, _ := json.Marshal(tc.req)
				if resp, err := tc.client.Post(srv.URL+tc.path, "application/json", bytes.NewReader(body)); err == nil {
					resp.Body.Close()
					if resp.StatusCode != 401 {
						t.Fatalf("status %d, want the handshake to fail or 401", resp.StatusCode)
					}
				}
				return
			}
			status, resp := post(t, tc.client, srv.URL+tc.path, tc.bearer, tc.req)
			if status != tc.status || (tc.code != "" && resp.Code != tc.code) {
				t.Fatalf("status %d %+v, want %d %s", status, resp, tc.status, tc.code)
			}
		})
	}
	if !granted.OK {
		t.Fatalf("line1's grant: %+v", granted)
	}
	status, held := post(t, anon, srv.URL+"/v1/leases/line1-press/renew", "0123456789abcdef0123", protocol.Request{Token: granted.Token})
	if status != 200 || held.Code != protocol.CodeRenewed {
		t.Fatalf("the refused release changed the lease: renew %d %+v", status, held)
	}
	for _, open := range []string{"/healthz", "/v1/keys", "/readyz"} {
		resp, err := anon.Get(srv.URL + open)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s without credentials: %d, want 200", open, resp.StatusCode)
		}
	}
	if len(rec.Matching(map[string]string{"msg": "lease request refused by the authz policy"})) == 0 ||
		len(rec.Matching(map[string]string{"msg": "http request refused: not authenticated"})) == 0 {
		t.Errorf("refusals not logged: %s", rec.Dump())
	}
}
