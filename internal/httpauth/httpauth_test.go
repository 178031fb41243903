package httpauth

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func tokenFile(t *testing.T, body string) string {
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidateNamesKey(t *testing.T) {
	tests := []struct {
		name, addr string
		cfg        Config
		want       string
	}{
		{"exposed", "0.0.0.0:8480", Config{}, "http_auth.allow_unauthenticated"},
		{"exposed allowed", "0.0.0.0:8480", Config{AllowUnauthenticated: true}, ""},
		{"loopback", "127.0.0.1:8480", Config{}, ""},
		{"exposed with tokens", ":8480", Config{TokenFile: "t"}, ""},
		{"cert without key", "127.0.0.1:1", Config{TLS: ServerTLS{Cert: "c"}}, "http_auth.tls"},
		{"client CA without cert", "127.0.0.1:1", Config{TLS: ServerTLS{ClientCA: "ca"}}, "http_auth.tls.client_ca"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate("http_auth", tc.addr)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if got := DefaultHost(":8480"); got != "127.0.0.1:8480" {
		t.Fatalf("DefaultHost(:8480) = %s", got)
	}
}

func TestTokenFile(t *testing.T) {
	for _, bad := range []string{"", "# only a comment\n", "line1:short\n", ":0123456789abcdef0\n"} {
		if _, err := New(Config{TokenFile: tokenFile(t, bad)}, "http_auth", nil); err == nil || !strings.Contains(err.Error(), "http_auth.token_file") {
			t.Errorf("token file %q: err = %v, want a refusal naming http_auth.token_file", bad, err)
		}
	}
	a, err := New(Config{TokenFile: tokenFile(t, "line1:0123456789abcdef0\n0123456789abcdef1\n")}, "http_auth", nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen string
	h := a.Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen, _ = Identity(r.Context()) }))
	tests := []struct{ name, header, identity string }{
		{"named token", "Bearer 0123456789abcdef0", "line1"},
		{"unnamed token", "Bearer 0123456789abcdef1", "bearer"},
		{"wrong token", "Bearer 0123456789abcdef2", ""},
		{"no header", "", ""},
		{"basic auth", "Basic 0123456789abcdef0", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen = ""
			r := httptest.NewRequest(http.MethodPost, "/v1/leases/d/acquire", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			wantCode := 200
			if tc.identity == "" {
				wantCode = 401
			}
			if w.Code != wantCode || seen != tc.identity {
				t.Fatalf("status %d identity %q, want %d %q", w.Code, seen, wantCode, tc.identity)
			}
		})
	}
}

// TestClientTokenReadsTheServersFormat: a client sends the token of the
// first token line, "name:token" or bare, so one file serves both sides;
// a file with no token line is an error.
func TestClientTokenReadsTheServersFormat(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ content, want string }{
		{"# operators\n\nnight-shift: s3cret-token-0123456789\nday:other-token-0123456789\n", "s3cret-token-0123456789"},
		{"  bare-token-0123456789  \n", "bare-token-0123456789"},
	} {
		path := filepath.Join(dir, "tok")
		if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := ClientToken(path); err != nil || got != c.want {
			t.Errorf("ClientToken(%q) = %q, %v; want %q", c.content, got, err, c.want)
		}
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("# nothing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ClientToken(empty); err == nil {
		t.Error("a file with no token line: no error")
	}
	if got, err := ClientToken(""); got != "" || err != nil {
		t.Errorf("no file: %q, %v; want no token", got, err)
	}
}
