package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/lease/httpapi"
	"github.com/fencegate/fencegate/lease/leasetest"
)

// startWithBackup serves a controller on a bbolt store with its backup.
func startWithBackup(t *testing.T) (leasetest.Env, http.Handler, string) {
	clock := leasetest.NewClock()
	c, st, keys := leasetest.MustController(t, lease.Config{Clock: clock})
	h := httpapi.New(httpapi.Config{Controller: c, Backup: st})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return leasetest.Env{Client: client{srv.URL}, Clock: clock, Keys: keys}, h, srv.URL
}

func TestStatusListsDomainsWithTimeLeft(t *testing.T) {
	e, _, url := startWithBackup(t)
	tok := leasetest.Verified(t, e, leasetest.Acquire(t, e.Client, "press-7", "alice", time.Minute))
	e.Clock.Advance(10 * time.Second)
	var s httpapi.Status
	getJSON(t, url+"/v1/status", &s)
	if !s.Ready || s.Epoch != tok.Epoch || len(s.Domains) != 1 {
		t.Fatalf("status: %+v", s)
	}
	d := s.Domains[0]
	if d.Domain != "press-7" || d.Holder != "alice" || d.Seq != tok.Seq || d.Epoch != tok.Epoch || !d.Live || d.LeftMs != 50000 {
		t.Fatalf("domain: %+v, want alice's lease at seq %d with 50 s left", d, tok.Seq)
	}
	e.Clock.Advance(time.Minute)
	getJSON(t, url+"/v1/status", &s)
	if d := s.Domains[0]; d.Live || d.LeftMs != 0 || d.HighSeq != tok.Seq {
		t.Fatalf("after expiry: %+v", d)
	}
}

func TestStatusPageIsHTMLWithPolicy(t *testing.T) {
	e, _, url := startWithBackup(t)
	leasetest.Verified(t, e, leasetest.Acquire(t, e.Client, "press-7", "alice", time.Minute))
	resp, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(csp, "default-src 'none'") || !strings.Contains(string(body), `data-domain="press-7"`) {
		t.Fatalf("page: %d %q csp %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), csp, body)
	}
	if code, _ := getText(t, url+"/nothing-here"); code != 404 {
		t.Fatalf("unknown path: %d, want 404 (the page is served at / only)", code)
	}
}

func TestBackupServesACopyToLoopbackOnly(t *testing.T) {
	e, h, url := startWithBackup(t)
	leasetest.Verified(t, e, leasetest.Acquire(t, e.Client, "press-7", "alice", time.Minute))
	resp, err := http.Get(url + "/v1/backup")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || resp.ContentLength != int64(len(b)) {
		t.Fatalf("backup: %d, %d bytes (Content-Length %d), %v", resp.StatusCode, len(b), resp.ContentLength, err)
	}
	path := filepath.Join(t.TempDir(), "leases.db")
	os.WriteFile(path, b, 0o600)
	sum, err := boltstore.MarkRestorePending(path)
	if err != nil || sum.Domains != 1 {
		t.Fatalf("the copy: %+v %v", sum, err)
	}
	req := httptest.NewRequest("GET", "/v1/backup", nil)
	req.RemoteAddr = "192.0.2.9:4000"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || rec.Body.Len() > 200 {
		t.Fatalf("backup to a LAN client: %d (%d bytes), want 403", rec.Code, rec.Body.Len())
	}
}
