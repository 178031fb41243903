package server_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/lease/httpapi"
	"github.com/fencegate/fencegate/lease/server"
)

// TestSecurityConfigNamesKey: an exposed HTTP API or embedded broker
// without authentication, an authz policy without identities and a bad
// trust key are refused, naming the key.
func TestSecurityConfigNamesKey(t *testing.T) {
	dir := t.TempDir()
	good := server.Config{DataDir: dir, Key: filepath.Join(dir, "c.key"), GenerateKey: true, HTTP: "127.0.0.1:0"}
	policy := httpapi.Policy{{Identity: "line1", Domains: []string{"line1-*"}}}
	tests := []struct {
		name    string
		edit    func(*server.Config)
		wantErr string
	}{
		{"http on every interface", func(c *server.Config) { c.HTTP = "0.0.0.0:0" }, "http_auth.allow_unauthenticated"},
		{"authz without identities", func(c *server.Config) { c.Authz = policy }, "authz: needs client identities"},
		{"authz bad pattern", func(c *server.Config) {
			c.HTTPAuth.TokenFile = "t"
			c.Authz = httpapi.Policy{{Identity: "x", Domains: []string{"["}}}
		}, "authz[0].domains[0]"},
		{"embedded broker exposed", func(c *server.Config) { c.EmbeddedBroker = "0.0.0.0:0" }, "embedded_broker_allow_anonymous"},
		{"embedded broker password file missing", func(c *server.Config) {
			c.EmbeddedBroker, c.EmbeddedBrokerPasswordFile = "0.0.0.0:0", filepath.Join(dir, "none")
		}, "embedded_broker_password_file"},
		{"embedded broker client CA without cert", func(c *server.Config) {
			c.EmbeddedBroker, c.EmbeddedBrokerTLS.ClientCA = "127.0.0.1:0", "ca.pem"
		}, "embedded_broker_tls.client_ca"},
		{"trust key missing", func(c *server.Config) { c.TrustKeys = []string{filepath.Join(dir, "none.pub")} }, "trust_keys[0] (--trust-key)"},
		{"token file missing", func(c *server.Config) { c.HTTPAuth.TokenFile = filepath.Join(dir, "none") }, "http_auth.token_file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			c, err := server.New(cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New: %v, %v; want an error naming %q", c, err, tc.wantErr)
			}
		})
	}
}

// TestHTTPDefaultsToLoopback: a host-less --http binds 127.0.0.1.
func TestHTTPDefaultsToLoopback(t *testing.T) {
	dir := t.TempDir()
	c, err := server.New(server.Config{DataDir: dir, Key: filepath.Join(dir, "c.key"), GenerateKey: true, HTTP: ":0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer runAndStop(t, c)()
	if addr := c.HTTPAddr(); !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("HTTP listens on %s, want 127.0.0.1", addr)
	}
}

// runAndStop runs c and returns a function that stops it and checks Run's
// answer.
func runAndStop(t *testing.T, c *server.Controller) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
