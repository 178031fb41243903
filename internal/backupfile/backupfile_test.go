package backupfile

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			if r.Header.Get("Authorization") != "Bearer tok" {
				http.Error(w, "no token", http.StatusUnauthorized)
				return
			}
			w.Write([]byte("COPY"))
		case "/short":
			w.Header().Set("Content-Length", "100")
			w.Write([]byte("half"))
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	notCopy := func(string) error { return errors.New("not a store") }
	for _, tc := range []struct {
		name, path, token string
		check             func(string) error
		want              string // error text; "" for success
	}{
		{"fetched", "/ok", "tok", nil, ""},
		{"no token", "/ok", "", nil, "401"},
		{"short stream", "/short", "", nil, "cut short"},
		{"bad copy", "/ok", "tok", notCopy, "not a store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".db")
			n, err := Fetch(context.Background(), Request{URL: srv.URL + tc.path, Token: tc.token, Out: out, Check: tc.check})
			if tc.want == "" {
				b, _ := os.ReadFile(out)
				if err != nil || n != 4 || string(b) != "COPY" {
					t.Fatalf("fetch: %d, %v, file %q", n, err, b)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("fetch: %v, want an error with %q", err, tc.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("a failed fetch left %s (%v)", out, err)
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the one good copy (no temporary files)", len(entries))
	}
	if _, err := Fetch(context.Background(), Request{URL: srv.URL + "/ok", Token: "tok", Out: filepath.Join(dir, "fetched.db")}); !errors.Is(err, os.ErrExist) {
		t.Fatalf("fetch over an existing file: %v, want ErrExist", err)
	}
}

func TestLoopbackURL(t *testing.T) {
	for _, tc := range []struct{ listen, want string }{
		{"127.0.0.1:9464", "http://127.0.0.1:9464/x"},
		{":9464", "http://127.0.0.1:9464/x"},
		{"0.0.0.0:9464", "http://127.0.0.1:9464/x"},
		{"[::]:9464", "http://127.0.0.1:9464/x"},
		{"[::1]:9464", "http://[::1]:9464/x"},
		{"gw.local:8480", "http://gw.local:8480/x"},
	} {
		if got, err := LoopbackURL(tc.listen, "/x"); err != nil || got != tc.want {
			t.Errorf("LoopbackURL(%q) = %q, %v; want %q", tc.listen, got, err, tc.want)
		}
	}
}
