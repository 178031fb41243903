package server_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencegate/fencegate/lease/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestNewBadConfigNamesKey: New refuses a bad configuration with an error
// naming the key and the value, and opens nothing (no store file).
func TestNewBadConfigNamesKey(t *testing.T) {
	dir := t.TempDir()
	good := server.Config{DataDir: dir, Key: filepath.Join(dir, "c.key"), GenerateKey: true, HTTP: "127.0.0.1:0"}
	tests := []struct {
		name    string
		edit    func(*server.Config)
		wantErr string
	}{
		{name: "bad store", edit: func(c *server.Config) { c.Store = "zk" }, wantErr: `store (--store): "zk"`},
		{name: "negative max domains", edit: func(c *server.Config) { c.MaxDomains = -3 }, wantErr: "max_domains (--max-domains): -3"},
		{name: "bad log level", edit: func(c *server.Config) { c.LogLevel = "loud" }, wantErr: `log_level: "loud"`},
		{name: "no key", edit: func(c *server.Config) { c.Key = "" }, wantErr: "key (--key) is required"},
		{name: "bad reply prefix", edit: func(c *server.Config) { c.MQTT.Broker, c.MQTT.ReplyPrefixes = "tcp://127.0.0.1:1", []string{"x/#"} },
			wantErr: `mqtt.reply_prefixes[0] (--mqtt-reply-prefix)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			c, err := server.New(cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New: %v, %v; want an error naming %q", c, err, tc.wantErr)
			}
			if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 0 {
				t.Fatalf("a refused config left files behind: %v", m)
			}
		})
	}
}

// TestRunCancelCleanStop: New opens the store, the embedded broker and the
// HTTP listener (its address is known before Run); Run serves until its
// context is cancelled and then returns nil having stopped every goroutine
// (goleak in TestMain) and released the store (a second New on the same
// data dir opens it).
func TestRunCancelCleanStop(t *testing.T) {
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, Key: filepath.Join(dir, "c.key"), GenerateKey: true,
		HTTP: "127.0.0.1:0", EmbeddedBroker: "127.0.0.1:0"}
	for range 2 {
		c, err := server.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.HTTPAddr() == "" || !strings.HasPrefix(c.BrokerURL(), "tcp://127.0.0.1:") {
			t.Fatalf("addresses before Run: http %q, broker %q", c.HTTPAddr(), c.BrokerURL())
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		awaitReady(t, c)
		if code := get(t, "http://"+c.HTTPAddr()+"/readyz"); code != http.StatusOK {
			t.Fatalf("/readyz: %d", code)
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run after cancel: %v, want nil", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return within 30 s of cancel")
		}
	}
}

func awaitReady(t *testing.T, c *server.Controller) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for err := c.Ready(); err != nil; err = c.Ready() {
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 30 s: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
