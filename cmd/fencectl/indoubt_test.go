package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/agent"
	_ "github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// startAgentWithInDoubt runs an agent (embedded broker, HTTP on a free
// port) whose store holds command c-9 of pump1 in doubt, as a crash
// mid-apply leaves it, and returns its HTTP API URL.
func startAgentWithInDoubt(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	priv, err := fence.WriteKeyFiles(filepath.Join(dir, "c.key"), filepath.Join(dir, "c.pub"), true)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := fence.NewSigner(priv)
	tok, err := signer.Sign(fence.Token{Domain: "plant", Epoch: 1, Seq: 4, Holder: "line-a", IssuedAt: 1, TTLms: 1000})
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	os.MkdirAll(data, 0o700)
	s, err := persist.Open(filepath.Join(data, "fence.db"), persist.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Accept(context.Background(), persist.Command{Device: "pump1", ID: "c-9", Token: tok, Op: "set", Args: []byte(`{"value":5}`)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, err := mqtt.StartEmbedded("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var node yaml.Node
	yaml.Unmarshal([]byte("log: "+filepath.Join(dir, "pump1.log")), &node)
	cfg := agent.Config{Agent: agent.AgentConfig{ID: "gw1", DataDir: data}, MQTT: agent.MQTTConfig{Broker: b.URL()},
		Trust: agent.TrustConfig{Keys: []string{filepath.Join(dir, "c.pub")}}, HTTP: agent.HTTPConfig{Listen: "127.0.0.1:0"},
		Devices: []agent.DeviceConfig{{ID: "pump1", Domain: "plant", Driver: "sim", Settings: *node.Content[0]}}}
	a, err := agent.New(cfg.WithDefaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("agent did not stop")
		}
	})
	return "http://" + a.HTTPAddr()
}

func TestInDoubtListAndResolve(t *testing.T) {
	url := startAgentWithInDoubt(t)
	out, errs, code := fencectl(t, "indoubt", "list", "--agent", url)
	if code != exitOK || !strings.Contains(out, "pump1") || !strings.Contains(out, `"c-9"`) ||
		!strings.Contains(out, `{"value":5}`) || !strings.Contains(out, "line-a") {
		t.Fatalf("list: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = fencectl(t, "indoubt", "resolve", "pump1", "c-9", "--not-applied", "--by", "jo", "--agent", url)
	if code != exitOK || !strings.Contains(out, "resolved not_applied") || !strings.Contains(out, "failed/device_error") {
		t.Fatalf("resolve: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = fencectl(t, "indoubt", "list", "--agent", url)
	if code != exitOK || !strings.Contains(out, "no open in-doubt commands") {
		t.Fatalf("list after resolve: exit %d\n%s%s", code, out, errs)
	}
	_, errs, code = fencectl(t, "indoubt", "resolve", "pump1", "c-9", "--applied", "--agent", url)
	if code != exitError || !strings.Contains(errs, "not an open in-doubt command") {
		t.Fatalf("second resolve: exit %d, stderr %s", code, errs)
	}
}

func TestInDoubtResolveUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"neither flag", []string{"resolve", "pump1", "c-9"}, "exactly one of --applied and --not-applied"},
		{"both flags", []string{"resolve", "pump1", "c-9", "--applied", "--not-applied"}, "exactly one of"},
		{"no id", []string{"resolve", "pump1", "--applied"}, "usage: fencectl indoubt resolve DEVICE ID"},
		{"unknown subcommand", []string{"fix"}, `unknown subcommand "fix"`},
		{"no agent", []string{"list", "--agent", "http://127.0.0.1:1"}, "agent http://127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := fencectl(t, append([]string{"indoubt"}, tc.args...)...)
			if code != exitError || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errs, tc.want)
			}
		})
	}
	if out, _, code := fencectl(t, "indoubt", "-h"); code != exitOK || !strings.Contains(out, "fencectl indoubt resolve DEVICE ID") {
		t.Fatalf("indoubt -h: exit %d\n%s", code, out)
	}
}
