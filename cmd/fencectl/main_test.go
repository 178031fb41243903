package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/stack"
	"github.com/fencegate/fencegate/protocol"
)

// TestMain doubles as supervisor A when the demo re-executes this binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == demoSupervisorCmd {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/eclipse/paho.mqtt.golang.(*router).matchAndDispatch"))
}

func fencectl(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := run(ctx, args, &out, &errb)
	return out.String(), errb.String(), code
}

func startStack(t *testing.T) *stack.Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestDemo runs the README's first command and checks its verdict.
func TestDemo(t *testing.T) {
	out, errs, code := fencectl(t, "demo", "--ttl", "800ms", "--pause", "2s")
	if code != exitOK {
		t.Fatalf("demo exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"REJECTED stale_token", "before B sent anything", "invariant I2 holds"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

func TestLeaseAndSendJSON(t *testing.T) {
	s := startStack(t)
	b := "--broker=" + s.URL()
	out, errs, code := fencectl(t, "lease", "acquire", "plant", b, "--holder", "ops", "--ttl", "20s", "--json")
	if code != exitOK {
		t.Fatalf("acquire exit %d: %s %s", code, out, errs)
	}
	var resp protocol.Response
	if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.Code != protocol.CodeGranted || resp.Token == "" {
		t.Fatalf("acquire --json: %q (%v)", out, err)
	}
	out, _, code = fencectl(t, "send", "pump1", "set", `{"value":7}`, b, "--token", resp.Token, "--id", "c1", "--json")
	var res protocol.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitOK || res.Status != protocol.StatusApplied {
		t.Fatalf("send: exit %d %q", code, out)
	}
	_, _, code = fencectl(t, "lease", "acquire", "plant", b, "--holder", "other", "--ttl", "1s")
	if code != exitRejected {
		t.Fatalf("acquire of a held domain: exit %d, want %d", code, exitRejected)
	}
	out, _, code = fencectl(t, "send", "pump1", "explode", b, "--token", resp.Token)
	if code != exitRejected || !strings.Contains(out, "unknown_op") {
		t.Fatalf("unknown op: exit %d %q", code, out)
	}
	out, _, code = fencectl(t, "lease", "get", "plant", b)
	if code != exitOK || !strings.Contains(out, "held") || !strings.Contains(out, "ops") {
		t.Fatalf("get: exit %d %q", code, out)
	}
	if out, _, code = fencectl(t, "lease", "renew", "plant", b, "--token", resp.Token, "--ttl", "20s"); code != exitOK {
		t.Fatalf("renew exit %d: %s", code, out)
	}
	if _, _, code = fencectl(t, "lease", "release", "plant", b, "--token", resp.Token); code != exitOK {
		t.Fatalf("release exit %d", code)
	}
	// A newer holder fences the old token out: rejected, exit 2.
	if out, _, code = fencectl(t, "send", "pump1", "set", `{"value":1}`, b, "--domain", "plant", "--holder", "new"); code != exitOK {
		t.Fatalf("send --domain: exit %d %q", code, out)
	}
	out, _, code = fencectl(t, "send", "pump1", "set", `{"value":2}`, b, "--token", resp.Token)
	if code != exitRejected || !strings.Contains(out, "stale_token") {
		t.Fatalf("stale send: exit %d %q", code, out)
	}
}

func TestDevicesAndWatch(t *testing.T) {
	s := startStack(t)
	b := "--broker=" + s.URL()
	if _, _, code := fencectl(t, "send", "pump1", "set", `{"value":1}`, b, "--domain", "plant"); code != exitOK {
		t.Fatalf("send exit %d", code)
	}
	out, _, code := fencectl(t, "devices", b, "--json", "--settle", "500ms")
	if code != exitOK {
		t.Fatalf("devices exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("devices: %q, want pump1 and valve1", out)
	}
	var st protocol.DeviceState
	if err := json.Unmarshal([]byte(lines[0]), &st); err != nil || st.Device != "pump1" || st.Fence == nil || st.Fence.Holder != "fencectl" {
		t.Fatalf("devices --json first line %q (%v)", lines[0], err)
	}
	out, _, code = fencectl(t, "watch", "pump1", b, "--for", "500ms")
	if code != exitOK || !strings.Contains(out, "state  pump1") {
		t.Fatalf("watch: exit %d %q", code, out)
	}
}

func TestKeygenAndTokenDecode(t *testing.T) {
	dir := t.TempDir()
	if _, errs, code := fencectl(t, "keygen", "--dir", dir); code != exitOK {
		t.Fatalf("keygen: %d %s", code, errs)
	}
	if _, _, code := fencectl(t, "keygen", "--dir", dir); code != exitError {
		t.Fatalf("second keygen without --force: exit %d", code)
	}
	priv, err := fence.LoadPrivateKey(filepath.Join(dir, fence.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := fence.NewSigner(priv)
	tok, err := signer.Sign(fence.Token{Domain: "plant", Epoch: 5, Seq: 9, Holder: "A", IssuedAt: 1, TTLms: 1000})
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(dir, fence.PublicKeyFile)
	out, _, code := fencectl(t, "token", "decode", tok.Raw, "--pub", pub, "--json")
	var v tokenView
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != exitOK || v.Seq != 9 || v.Verified == nil || !*v.Verified {
		t.Fatalf("decode: exit %d %q", code, out)
	}
	other := t.TempDir()
	fencectl(t, "keygen", "--dir", other)
	out, _, code = fencectl(t, "token", "decode", tok.Raw, "--pub", filepath.Join(other, fence.PublicKeyFile))
	if code != exitRejected || !strings.Contains(out, "signature INVALID") {
		t.Fatalf("decode with a foreign key: exit %d %q", code, out)
	}
	if _, _, code = fencectl(t, "token", "decode", "fg1.garbage"); code != exitRejected {
		t.Fatalf("garbage token: exit %d", code)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"no command", nil},
		{"unknown command", []string{"frobnicate"}},
		{"send without token or domain", []string{"send", "pump1", "set"}},
		{"lease unknown op", []string{"lease", "steal", "plant"}},
		{"bad args json", []string{"send", "pump1", "set", "{", "--token", "x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, errs, code := fencectl(t, tc.args...); code != exitError || errs == "" {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
		})
	}
}
