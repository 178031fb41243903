package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/protocol"
)

// seedInDoubt journals command id for device as accepted in the agent's
// store and closes it without a result, as a crash mid-apply leaves it:
// the agent finds it in doubt when it opens the store.
func (h *harness) seedInDoubt(device, id, op string, args string, seq uint64, holder string) protocol.Command {
	h.t.Helper()
	if err := os.MkdirAll(h.cfg.Agent.DataDir, 0o700); err != nil {
		h.t.Fatal(err)
	}
	s, err := persist.Open(filepath.Join(h.cfg.Agent.DataDir, "fence.db"), persist.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	raw := h.token(seq, holder)
	tok, err := fence.ParseUnverified(raw)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := s.Accept(context.Background(), persist.Command{Device: device, ID: id, Token: tok, Op: op, Args: []byte(args)}); err != nil {
		h.t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		h.t.Fatal(err)
	}
	return protocol.Command{ID: id, Token: raw, Op: op, Args: json.RawMessage(args)}
}

func (h *harness) url(path string) string { return "http://" + h.agent.HTTPAddr() + path }

// post sends body to path with an optional bearer token and returns the
// status and body.
func (h *harness) post(path, token, body string) (int, string) {
	h.t.Helper()
	req, _ := http.NewRequest("POST", h.url(path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var inDoubtGauge = regexp.MustCompile(`(?m)^fencegate_agent_in_doubt_commands\{device="pump1"\} (\d+)$`)

func (h *harness) gauge() string {
	h.t.Helper()
	m := inDoubtGauge.FindStringSubmatch(getBody(h.t.(*testing.T), h.url("/metrics")))
	if m == nil {
		h.t.Fatal("metrics have no fencegate_agent_in_doubt_commands for pump1")
	}
	return m[1]
}

func TestInDoubtListResolveAndRetry(t *testing.T) {
	h := newHarness(t, "pump1")
	cmd := h.seedInDoubt("pump1", "c-17", "set", `{"value": 7}`, 5, "sup-a")
	h.start()

	var list []InDoubtCommand
	getJSON(t, h.url("/v1/indoubt"), &list)
	if len(list) != 1 {
		t.Fatalf("in-doubt list: %+v", list)
	}
	if e := list[0]; e.Device != "pump1" || e.ID != "c-17" || e.Op != "set" || string(e.Args) != `{"value":7}` ||
		e.Holder != "sup-a" || e.Fence.Seq != 5 || e.AcceptedAt.IsZero() {
		t.Fatalf("in-doubt entry: %+v", e)
	}
	var devs []DeviceStatus
	getJSON(t, h.url("/v1/devices"), &devs)
	if len(devs) != 1 || devs[0].InDoubt != 1 {
		t.Fatalf("/v1/devices: %+v, want in_doubt 1", devs)
	}
	if g := h.gauge(); g != "1" {
		t.Fatalf("gauge before resolve: %s", g)
	}
	if r := h.sup.Send(t, "pump1", cmd); r.Status != protocol.StatusInDoubt || !r.Duplicate {
		t.Fatalf("retry before resolve: %+v", r)
	}

	status, body := h.post("/v1/indoubt/pump1/c-17/resolve", "", `{"resolution":"not_applied","by":"jo@plant"}`)
	if status != http.StatusOK {
		t.Fatalf("resolve: %d %s", status, body)
	}
	r := h.sup.Send(t, "pump1", cmd)
	if r.Status != protocol.StatusFailed || r.Code != protocol.CodeDeviceError || !r.Duplicate || !strings.Contains(r.Message, "not_applied by jo@plant") {
		t.Fatalf("retry after resolve: %+v", r)
	}
	if g := h.gauge(); g != "0" {
		t.Fatalf("gauge after resolve: %s", g)
	}
	entries, err := sim.ReadLog(filepath.Join(h.dir, "pump1.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if n := countID(entries, "c-17"); n != 0 {
		t.Fatalf("resolved command reached the device %d times", n)
	}
	if status, _ := h.post("/v1/indoubt/pump1/c-17/resolve", "", `{"resolution":"applied","by":"kim"}`); status != http.StatusConflict {
		t.Fatalf("second resolve: %d, want 409", status)
	}

	// The resolution survives a restart.
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.start()
	if r := h.sup.Send(t, "pump1", cmd); r.Code != protocol.CodeDeviceError || !strings.Contains(r.Message, "jo@plant") {
		t.Fatalf("retry after restart: %+v", r)
	}
	getJSON(t, h.url("/v1/indoubt"), &list)
	if len(list) != 0 {
		t.Fatalf("in-doubt list after resolve and restart: %+v", list)
	}
}

func TestResolveAppliedAnswersOK(t *testing.T) {
	h := newHarness(t, "pump1")
	cmd := h.seedInDoubt("pump1", "c-1", "set", `{"value":1}`, 5, "sup-a")
	h.start()
	if status, body := h.post("/v1/indoubt/pump1/c-1/resolve", "", `{"resolution":"applied","by":"jo"}`); status != 200 {
		t.Fatalf("resolve: %d %s", status, body)
	}
	r := h.sup.Send(t, "pump1", cmd)
	if r.Status != protocol.StatusApplied || r.Code != protocol.CodeOK || !r.Duplicate || !strings.Contains(r.Message, "resolved applied by jo") {
		t.Fatalf("retry after resolve applied: %+v", r)
	}
}

func TestResolveBadInputChangesNothing(t *testing.T) {
	h := newHarness(t, "pump1")
	h.seedInDoubt("pump1", "c-1", "set", `{"value":1}`, 5, "sup-a")
	h.start()
	for _, tc := range []struct {
		name, path, body string
		want             int
	}{
		{"unknown resolution", "/v1/indoubt/pump1/c-1/resolve", `{"resolution":"maybe","by":"jo"}`, 400},
		{"no resolver", "/v1/indoubt/pump1/c-1/resolve", `{"resolution":"applied"}`, 400},
		{"unknown field", "/v1/indoubt/pump1/c-1/resolve", `{"resolution":"applied","by":"jo","x":1}`, 400},
		{"not json", "/v1/indoubt/pump1/c-1/resolve", `applied`, 400},
		{"unknown device", "/v1/indoubt/pump9/c-1/resolve", `{"resolution":"applied","by":"jo"}`, 404},
		{"unknown command", "/v1/indoubt/pump1/c-2/resolve", `{"resolution":"applied","by":"jo"}`, 409},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := h.post(tc.path, "", tc.body)
			var e ErrorBody
			if status != tc.want || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
				t.Fatalf("%d %s, want %d with an error body", status, body, tc.want)
			}
		})
	}
	var list []InDoubtCommand
	getJSON(t, h.url("/v1/indoubt"), &list)
	if len(list) != 1 {
		t.Fatalf("bad requests changed the list: %+v", list)
	}
}

func TestOperatorEndpointsNeedTheToken(t *testing.T) {
	h := newHarness(t, "pump1")
	h.seedInDoubt("pump1", "c-1", "set", `{"value":1}`, 5, "sup-a")
	tokFile := filepath.Join(h.dir, "http.token")
	const secret = "s3cret-token-0123456789"
	if err := os.WriteFile(tokFile, []byte("night-shift:"+secret+"\n"), 0o600); err != nil { // internal/httpauth's name:token lines
		t.Fatal(err)
	}
	h.cfg.HTTP.TokenFile = tokFile
	h.start()
	for _, tok := range []string{"", "wrong-token-0123456789"} {
		if status, _ := h.post("/v1/indoubt/pump1/c-1/resolve", tok, `{"resolution":"applied","by":"jo"}`); status != http.StatusUnauthorized {
			t.Fatalf("resolve with token %q: %d, want 401", tok, status)
		}
	}
	resp, err := http.Get(h.url("/v1/backup"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("backup without token: %d, want 401", resp.StatusCode)
	}
	status, body := h.post("/v1/indoubt/pump1/c-1/resolve", secret, `{"resolution":"applied","by":"jo"}`)
	if status != 200 {
		t.Fatalf("resolve with the token: %d %s", status, body)
	}
	if !strings.Contains(body, "jo (authenticated as night-shift)") {
		t.Fatalf("resolution %s does not name the token's identity beside the declared resolver", body)
	}
}

func TestOperatorEndpointsWithoutTokenServeLoopbackOnly(t *testing.T) {
	a := &Agent{}
	called := false
	h := a.operatorOnly(func(http.ResponseWriter, *http.Request) { called = true })
	for _, tc := range []struct {
		name, remote string
		want         int
	}{
		{"loopback v4", "127.0.0.1:5000", 200},
		{"loopback v6", "[::1]:5000", 200},
		{"lan", "192.0.2.7:5000", 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			called = false
			req := httptest.NewRequest("POST", "/v1/indoubt/p/x/resolve", nil)
			req.Host = "127.0.0.1:9464"
			req.Header.Set("Content-Type", "application/json")
			req.RemoteAddr = tc.remote
			rec := httptest.NewRecorder()
			h(rec, req)
			if rec.Code != tc.want || called != (tc.want == 200) {
				t.Fatalf("status %d, handler called %v; want %d", rec.Code, called, tc.want)
			}
		})
	}
}

func TestBadTokenFileNamesTheKey(t *testing.T) {
	h := newHarness(t, "pump1")
	short := filepath.Join(h.dir, "short.token")
	os.WriteFile(short, []byte("abc"), 0o600)
	for _, path := range []string{filepath.Join(h.dir, "missing.token"), short} {
		h.cfg.HTTP.TokenFile = path
		_, err := New(h.cfg.WithDefaults(), nil)
		if err == nil || !strings.Contains(err.Error(), "http.token_file") {
			t.Fatalf("token file %s: %v, want an error naming http.token_file", path, err)
		}
	}
	if _, err := os.Stat(filepath.Join(h.cfg.Agent.DataDir, "fence.db")); !os.IsNotExist(err) {
		t.Fatalf("a bad token file still created the store (%v)", err)
	}
}

func TestBackupWhileRunning(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	if r := h.sup.Send(t, "pump1", protocol.Command{ID: "b1", Token: h.token(9, "sup-b"), Op: "set", Args: json.RawMessage(`{"value":3}`)}); r.Code != protocol.CodeOK {
		t.Fatalf("command: %+v", r)
	}
	resp, err := http.Get(h.url("/v1/backup"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || resp.ContentLength != int64(len(b)) {
		t.Fatalf("backup: %d, %d bytes (Content-Length %d), %v", resp.StatusCode, len(b), resp.ContentLength, err)
	}
	// The agent still serves after the backup.
	if r := h.sup.Send(t, "pump1", protocol.Command{ID: "b2", Token: h.token(10, "sup-c"), Op: "set", Args: json.RawMessage(`{"value":4}`)}); r.Code != protocol.CodeOK {
		t.Fatalf("command after backup: %+v", r)
	}
	copyPath := filepath.Join(t.TempDir(), "fence.db")
	if err := os.WriteFile(copyPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := persist.Open(copyPath, persist.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tok, _ := s.DomainFence("plant")
	if tok.Seq != 9 || tok.Holder != "sup-b" {
		t.Fatalf("restored fence: %v, want seq 9 of sup-b", tok)
	}
	if rec, ok, _ := s.Lookup("pump1", "b1"); !ok || rec.State != persist.StateDone || !bytes.Contains(rec.Result, []byte(`"ok"`)) {
		t.Fatalf("restored journal: %+v %v", rec, ok)
	}
}
