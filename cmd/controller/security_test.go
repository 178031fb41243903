package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSecurityFlags: --trust-key repeats and replaces the file's
// trust_keys; the HTTP auth flags land in http_auth; an exposed --http
// without them is refused naming the key.
func TestSecurityFlags(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(conf, []byte("trust_keys: [from-file.pub]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--config", conf, "--data-dir", dir, "--key", filepath.Join(dir, "c.key")}
	cmd, err := parseArgs(append(base, "--http", "0.0.0.0:8480", "--trust-key", "a.pub", "--trust-key", "b.pub",
		"--http-token-file", "tokens", "--http-cert", "c.pem", "--http-key", "c.key", "--http-client-ca", "ca.pem"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a := cmd.cfg.HTTPAuth
	if !slices.Equal(cmd.cfg.TrustKeys, []string{"a.pub", "b.pub"}) || a.TokenFile != "tokens" || a.TLS.Cert != "c.pem" ||
		a.TLS.Key != "c.key" || a.TLS.ClientCA != "ca.pem" {
		t.Fatalf("parsed %+v / %+v", cmd.cfg.TrustKeys, a)
	}
	_, err = parseArgs(append(base, "--http", "0.0.0.0:8480"), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "http_auth.allow_unauthenticated") {
		t.Fatalf("exposed --http without auth: %v, want an error naming http_auth.allow_unauthenticated", err)
	}
	if _, err := parseArgs(append(base, "--http", "0.0.0.0:8480", "--http-allow-unauthenticated"), io.Discard); err != nil {
		t.Fatalf("with --http-allow-unauthenticated: %v", err)
	}
}
