package securitytest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/agent"
	_ "github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/tlstest"
	"github.com/fencegate/fencegate/lease/server"
	"github.com/fencegate/fencegate/supervisor"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// pki is the test installation's certificates: a CA, the broker's server
// certificate and a client certificate per component.
type pki struct {
	ca     *tlstest.CA
	broker tlstest.Pair
}

func newPKI(t *testing.T) *pki {
	ca := tlstest.NewCA(t, "plant")
	return &pki{ca: ca, broker: ca.Server("broker")}
}

// client is a TLS client configuration presenting cn's certificate.
func (p *pki) client(cn string) mqtt.TLS {
	c := p.ca.Client(cn)
	return mqtt.TLS{CA: p.ca.CAFile, Cert: c.Cert, Key: c.Key}
}

// runCtl runs a controller (lease/server) signing with key on broker,
// connecting with tls, until the test ends; it returns once the MQTT API
// is ready.
func runCtl(t *testing.T, broker, key string, tls mqtt.TLS) {
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, Key: key,
		MQTT: server.MQTTConfig{Config: mqtt.Config{Broker: broker, ClientID: "controller", TLS: tls}}}
	c, err := server.New(cfg, testLog(t, "controller"))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, c.Run)
	waitUntil(t, "controller ready", func() bool { return c.Ready() == nil })
}

// keyPair writes a controller key pair into a new directory.
func keyPair(t *testing.T) (keyPath, pubPath string) {
	dir := t.TempDir()
	keyPath, pubPath = filepath.Join(dir, "controller.key"), filepath.Join(dir, "controller.pub")
	if _, err := fence.WriteKeyFiles(keyPath, pubPath, false); err != nil {
		t.Fatal(err)
	}
	return keyPath, pubPath
}

// agentConfig is an agent "gw1" with sim devices press1 (domain
// line1-press) and press2 (line2-press).
func agentConfig(t *testing.T, pub string) agent.Config {
	cfg := agent.Config{Agent: agent.AgentConfig{ID: "gw1", DataDir: t.TempDir()},
		Trust: agent.TrustConfig{Keys: []string{pub}}, HTTP: agent.HTTPConfig{Listen: "off"}}
	for _, d := range []struct{ id, domain string }{{"press1", "line1-press"}, {"press2", "line2-press"}} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(fmt.Sprintf("log: %q\n", filepath.Join(t.TempDir(), d.id+".log"))), &doc); err != nil {
			t.Fatal(err)
		}
		cfg.Devices = append(cfg.Devices, agent.DeviceConfig{ID: d.id, Domain: d.domain, Driver: "sim", Settings: *doc.Content[0]})
	}
	return cfg
}

// runAgent starts an agent with cfg until the test ends.
func runAgent(t *testing.T, cfg agent.Config) *agent.Agent {
	a, err := agent.New(cfg.WithDefaults(), testLog(t, "agent"))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a.Run)
	return a
}

// dialSup connects a supervisor named holder over TLS.
func dialSup(t *testing.T, broker, holder string, tls mqtt.TLS) *supervisor.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := supervisor.Dial(ctx, supervisor.Config{MQTT: mqtt.Config{Broker: broker, ClientID: holder, TLS: tls}, Holder: holder})
	if err != nil {
		t.Fatalf("supervisor %s: %v", holder, err)
	}
	t.Cleanup(c.Close)
	return c
}

// runUntilCleanup runs run in a goroutine; cleanup cancels it and checks
// its clean exit.
func runUntilCleanup(t *testing.T, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testLog logs to the test's log at warn and above.
func testLog(t *testing.T, component string) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("component", component)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// mosquittoBin finds mosquitto or skips the test, saying so.
func mosquittoBin(t *testing.T) string {
	if bin, err := exec.LookPath("mosquitto"); err == nil {
		return bin
	}
	if _, err := os.Stat("/usr/sbin/mosquitto"); err == nil {
		return "/usr/sbin/mosquitto"
	}
	t.Skip("mosquitto is not installed (apt-get install mosquitto); CI installs it")
	return ""
}

// startMosquittoTLS runs mosquitto with deploy/mosquitto/tls.conf — its
// certificate paths pointed at p's files, its listener at a free
// loopback port, its acl_file at deploy/mosquitto's — and returns the
// ssl:// URL.
func startMosquittoTLS(t *testing.T, p *pki) string {
	bin := mosquittoBin(t)
	deploy, err := filepath.Abs("../../deploy/mosquitto")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(deploy, "tls.conf"))
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	conf := strings.NewReplacer("/etc/fencegate/tls/", readableCopy(t, p.ca.Dir)+"/", "listener 8883 0.0.0.0", "listener "+port+" 127.0.0.1",
		"acl_file acl-teams", "acl_file "+filepath.Join(deploy, "acl-teams")).Replace(string(text))
	if conf == string(text) || !strings.Contains(conf, "listener "+port) {
		t.Fatal("deploy/mosquitto/tls.conf no longer has the lines this test rewrites")
	}
	path := filepath.Join(t.TempDir(), "mosquitto.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", path)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("mosquitto output:\n%s", out.String())
		}
	})
	waitUntil(t, "mosquitto listening", func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "ssl://localhost:" + port
}

// readableCopy copies dir's files into a new directory every user may
// read: mosquitto started as root drops to its own user before it reads
// its certificates.
func readableCopy(t *testing.T, dir string) string {
	out, err := os.MkdirTemp("", "fencegate-tls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(out, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
