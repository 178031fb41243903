package e2e

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/firmware/internal/cbuild"
	"github.com/fencegate/fencegate/internal/mqtttest"
	"github.com/fencegate/fencegate/lease/server"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
	"github.com/fencegate/fencegate/transport/mqtt"
)

const (
	domain = "plant"
	device = "fw1"
	wait   = 30 * time.Second
)

// env is one installation: Mosquitto, the controller, the device binary
// and a watcher.
type env struct {
	dir     string
	broker  string // tcp://127.0.0.1:port
	pubKey  string // the controller's public key file
	keyHex  string // its raw public key, as firmware is given it
	bin     string // the fgdevice binary
	watcher *mqtttest.Supervisor
}

// newEnv skips without the toolchain, libraries or Mosquitto; otherwise it
// builds the device and starts Mosquitto and the controller.
func newEnv(t *testing.T) *env {
	t.Helper()
	cbuild.Require(t, "libsodium", "libmosquitto")
	e := &env{dir: t.TempDir()}
	e.bin = cbuild.Build(t, e.dir, "fgdevice", []string{"libmosquitto"},
		"examples/mqtt-device/json.c", "examples/mqtt-device/device.c", "examples/mqtt-device/fgdevice.c")
	e.broker = startMosquitto(t, e.dir)
	e.startController(t)
	e.watcher = mqtttest.NewSupervisor(t, e.broker, mqtttest.Options{ClientID: "watcher", Timeout: wait})
	return e
}

// startMosquitto runs mosquitto on a free loopback port until the test
// ends, and returns its URL.
func startMosquitto(t *testing.T, dir string) string {
	t.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/mosquitto"); serr != nil {
			t.Skip("mosquitto is not installed (apt-get install mosquitto); .ci/run installs it")
		}
		bin = "/usr/sbin/mosquitto"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	conf := filepath.Join(dir, "mosquitto.conf")
	text := fmt.Sprintf("listener %s 127.0.0.1\nallow_anonymous true\npersistence false\n", port)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "mosquitto", bin, "-c", conf)
	for range 200 {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return "tcp://" + addr
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("mosquitto is not listening on %s; its output:\n%s", addr, p.out.String())
	return ""
}

// startController runs the lease controller (lease/server, as
// cmd/controller does) on the broker with a fresh key, until the test ends.
func (e *env) startController(t *testing.T) {
	t.Helper()
	key := filepath.Join(e.dir, "controller.key")
	e.pubKey = filepath.Join(e.dir, "controller.pub")
	priv, err := fence.WriteKeyFiles(key, e.pubKey, true)
	if err != nil {
		t.Fatal(err)
	}
	e.keyHex = hex.EncodeToString(priv.Public().(ed25519.PublicKey))
	cfg := server.Config{DataDir: filepath.Join(e.dir, "controller"), Key: key,
		MQTT: server.MQTTConfig{Config: mqtt.Config{Broker: e.broker, ClientID: "controller"}}}
	c, err := server.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	deadline := time.Now().Add(wait)
	for c.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("controller not ready: %v", c.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// process is a child process whose output is collected.
type process struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{} // closed when it has exited
}

func startProcess(t *testing.T, name, bin string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.out.String())
		}
	})
	return p
}

// kill SIGKILLs the process (a power cut, as far as the device's files
// go) and waits for it to exit.
func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// lockedBuffer collects a child's output; safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// deviceFiles are the device's durable fence and its apply log.
func (e *env) deviceFiles() (state, applyLog string) {
	return filepath.Join(e.dir, "fw1.fence"), filepath.Join(e.dir, "fw1-applied.log")
}

// startDevice starts fgdevice (protocol mode, or relay mode under base)
// and waits until it announced itself online on its status topic (or LWT).
func (e *env) startDevice(t *testing.T, base string) *process {
	t.Helper()
	state, applyLog := e.deviceFiles()
	args := []string{"--id", device, "--domain", domain, "--key", e.keyHex, "--state", state, "--log", applyLog,
		"--broker", strings.TrimPrefix(e.broker, "tcp://")}
	online := e.watcher.Watch(t, statusTopic(base))
	if base != "" {
		args = append(args, "--relay", base, "--client-id", "fw1-relay")
	}
	p := startProcess(t, "fgdevice", e.bin, args...)
	waitFor(t, online, "the device online", func(b []byte) bool {
		return string(b) == "Online" || strings.Contains(string(b), `"online":true`)
	})
	return p
}

// statusTopic is where the device says it is online: its agent status
// topic in protocol mode, its LWT under base in relay mode.
func statusTopic(base string) string {
	if base != "" {
		return base + "/tele/LWT"
	}
	return protocol.Topics{}.AgentStatus(device)
}

// waitFor reads ch until ok accepts a payload, failing t after wait.
func waitFor(t *testing.T, ch <-chan []byte, what string, ok func([]byte) bool) []byte {
	t.Helper()
	deadline := time.After(wait)
	var seen []string
	for {
		select {
		case p := <-ch:
			if ok(p) {
				return p
			}
			seen = append(seen, string(p))
		case <-deadline:
			t.Fatalf("waiting for %s: saw %q", what, seen)
		}
	}
}

// dial connects a supervisor (Go SDK) named holder.
func (e *env) dial(t *testing.T, holder string) *supervisor.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := supervisor.Dial(ctx, supervisor.Config{MQTT: mqtt.Config{Broker: e.broker, ClientID: holder},
		Holder: holder, RetryInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// rawAcquire takes a lease with a raw request: no renewals, so the holder
// "stalls" — its lease runs out after ttl while it still has the token.
func rawAcquire(t *testing.T, c *supervisor.Client, dom string, ttl time.Duration) fence.Token {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	resp, err := c.LeaseRequest(ctx, dom, protocol.OpAcquire, protocol.Request{Holder: c.Holder(), TTLms: uint64(ttl.Milliseconds())})
	if err != nil || resp.Code != protocol.CodeGranted {
		t.Fatalf("acquire %s: %+v, %v", dom, resp, err)
	}
	tok, err := fence.ParseUnverified(resp.Token)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// send sends a command under token straight to the device id and returns
// its result (an error result too).
func send(t *testing.T, c *supervisor.Client, token string, args any) protocol.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	res, err := c.SendToken(ctx, token, device, "power", args)
	var re *supervisor.ResultError
	if err != nil && !errors.As(err, &re) {
		t.Fatalf("send: %v", err)
	}
	return res
}

// wantResult checks a result's status, code and fence.
func wantResult(t *testing.T, what string, r protocol.Result, code protocol.Code, f fence.Token) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("%s: %+v, want %s", what, r, code)
	}
	if r.Fence == nil || *r.Fence != f.Fence() {
		t.Fatalf("%s: fence %+v, want %+v", what, r.Fence, f.Fence())
	}
}

// applied reads the device's apply log.
func (e *env) applied(t *testing.T) []sim.Entry {
	t.Helper()
	_, path := e.deviceFiles()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []sim.Entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var en sim.Entry
		if err := json.Unmarshal(sc.Bytes(), &en); err != nil {
			t.Fatalf("apply log line %q: %v", sc.Text(), err)
		}
		out = append(out, en)
	}
	return out
}

// wantApplied requires the apply log to hold, in order, commands under
// exactly these tokens.
func (e *env) wantApplied(t *testing.T, toks ...fence.Token) {
	t.Helper()
	got := e.applied(t)
	ok := len(got) == len(toks)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i].Domain == toks[i].Domain && got[i].Epoch == toks[i].Epoch && got[i].Seq == toks[i].Seq &&
			got[i].Holder == toks[i].Holder
	}
	if !ok {
		t.Fatalf("apply log %+v, want commands under %v", got, toks)
	}
}

// forged returns a token for the device's domain, newer than anything the
// controller issued, signed by a key nobody trusts.
func forged(t *testing.T) string {
	t.Helper()
	priv, err := fence.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := fence.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Sign(fence.Token{Domain: domain, Epoch: 1 << 62, Seq: 1, Holder: "mallory", IssuedAt: 1, TTLms: 60000})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Raw
}

// tampered is tok's wire form with one signature character changed (still
// canonical base64url): the controller's key id, a broken signature.
func tampered(tok string) string {
	b := []byte(tok)
	i := len(b) - 10
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}
