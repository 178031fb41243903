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

// startAgentWithInDoubtID17 runs an agent (embedded broker, HTTP on a free
// port) whose store holds command id of pump1 in doubt, as a crash
// mid-apply leaves it, and returns its HTTP API URL.
func startAgentWithInDoubtID17(t *testing.T, id string) string {
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
	if _, err := s.Accept(context.Background(), persist.Command{Device: "pump1", ID: id, Token: tok, Op: "set", Args: []byte(`{"value":5}`)}); err != nil {
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

// Attack (issue 17a, fencectl indoubt resolve): a command id is any
// 1..128 bytes (protocol v1), so "." and ".." are ids the agent accepts,
// journals and lists in doubt (fencectl indoubt list shows them). fencectl
// builds the resolve URL with url.PathEscape, which leaves dots alone, so
// the path is /v1/indoubt/pump1/../resolve: the agent's ServeMux cleans it
// and redirects to /v1/indoubt/resolve (307), and the resolve never
// reaches the handler. The agent would route the id if fencectl escaped
// the dots ("%2E%2E" reaches the handler). The command stays in doubt
// until the journal window prunes it, after which a retry counts as new
// (docs/operations.md: "resolve before then").
//
// Fails on the current code: fencectl indoubt resolve exits non-zero for
// these ids and the command is still listed.
func TestAttack17FencectlResolveDotIDs(t *testing.T) {
	for _, id := range []string{"..", "."} {
		t.Run(id, func(t *testing.T) {
			url := startAgentWithInDoubtID17(t, id)
			out, errs, code := fencectl(t, "indoubt", "list", "--agent", url)
			if code != exitOK || !strings.Contains(out, "pump1") {
				t.Fatalf("list: exit %d\n%s%s", code, out, errs)
			}
			out, errs, code = fencectl(t, "indoubt", "resolve", "pump1", id, "--not-applied", "--by", "jo", "--agent", url)
			if code != exitOK || !strings.Contains(out, "resolved not_applied") {
				t.Fatalf("fencectl indoubt resolve pump1 %q of a listed in-doubt command: exit %d\nstdout: %s\nstderr: %s", id, code, out, errs)
			}
		})
	}
}
