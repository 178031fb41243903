package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/httpauth"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/httpapi"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/protocol"
)

// TestAttack16BackupNeedsTheBearerToken: the controller runs with HTTP
// authentication (http_auth.token_file) on a real bbolt store. A local
// process without any token asks GET /v1/backup on the loopback listener.
// docs/operations.md says the controller serves the backup "to loopback
// clients only (and to whatever the controller's HTTP authentication
// allows once it is in front of it; --token-file sends a bearer token)",
// and GET /v1/leases/{domain} — which returns the live token — is behind
// the token for that reason. But httpapi.New registers /v1/backup without
// cfg.Auth.Middleware: the unauthenticated client receives the whole
// store, live lease tokens included, i.e. exactly what the lease
// endpoints' authentication withholds from it.
func TestAttack16BackupNeedsTheBearerToken(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(line1Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := httpauth.New(httpauth.Config{TokenFile: tokens}, "http_auth", nil)
	if err != nil {
		t.Fatal(err)
	}
	c, st, _ := leasetest.MustController(t, lease.Config{Clock: leasetest.NewClock()})
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Controller: c, Backup: st, Auth: auth}))
	t.Cleanup(srv.Close)

	g := c.Do(context.Background(), protocol.OpAcquire, "line1-press",
		protocol.Request{RequestID: "r1", Holder: "line1-sup", TTLms: uint64(time.Minute.Milliseconds())})
	if !g.OK {
		t.Fatalf("acquire: %+v", g)
	}
	// the lease endpoint withholds the token from an unauthenticated client
	resp, err := http.Get(srv.URL + "/v1/leases/line1-press")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET lease without a token: %d, want 401", resp.StatusCode)
	}
	resp, err = http.Get(srv.URL + "/v1/backup")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/backup without a bearer token: %d (%d bytes; holds the live lease token: %v), want 401",
			resp.StatusCode, len(b), bytes.Contains(b, []byte(g.Token)))
	}
}
