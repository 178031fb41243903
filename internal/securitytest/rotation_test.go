package securitytest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// systemctlShim stands in for systemd: start, stop, restart and reload of
// fencegate-agent and fencegate-controller, run from $FG/run (pid files,
// logs). A stopped process is waited for until it is gone or a zombie.
const systemctlShim = `#!/usr/bin/env bash
set -euo pipefail
action=$1; unit=${2%.service}
run=$FG/run
case $unit in
  fencegate-agent) name=agent; cmd=(agent --config "$FG/agent.yaml") ;;
  fencegate-controller) name=controller; cmd=(controller --config "$FG/controller.yaml") ;;
  *) echo "systemctl shim: unknown unit $unit" >&2; exit 1 ;;
esac
gone() { [ ! -e /proc/$1 ] || grep -q '^State:.*Z' /proc/$1/status; }
stop() {
  [ -f "$run/$name.pid" ] || return 0
  pid=$(cat "$run/$name.pid"); kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 200); do gone "$pid" && break; sleep 0.05; done
  gone "$pid" || { echo "systemctl shim: $name did not stop" >&2; exit 1; }
  rm -f "$run/$name.pid"
}
start() { setsid "${cmd[@]}" >>"$run/$name.log" 2>&1 < /dev/null & echo $! > "$run/$name.pid"; }
case $action in
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  reload) kill -HUP "$(cat "$run/$name.pid")" ;;
  *) echo "systemctl shim: unknown action $action" >&2; exit 1 ;;
esac
`

// install is the rotation test's site: binaries and the shim on PATH,
// configs and keys under FG.
type install struct {
	t      *testing.T
	fg     string
	env    []string
	broker string
}

func newInstall(t *testing.T) *install {
	fg := t.TempDir()
	bin := filepath.Join(fg, "bin")
	for _, d := range []string{bin, filepath.Join(fg, "run"), filepath.Join(fg, "keys")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/controller", "./cmd/agent", "./cmd/fencectl")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(systemctlShim), 0o755); err != nil {
		t.Fatal(err)
	}
	in := &install{t: t, fg: fg, broker: "tcp://127.0.0.1:" + freePort(t)}
	in.env = append(os.Environ(), "FG="+fg, "PATH="+bin+":"+os.Getenv("PATH"))
	return in
}

// sh runs a shell script with the site's environment (and extra).
func (in *install) sh(script string, extra ...string) string {
	in.t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Env = append(append([]string(nil), in.env...), extra...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		in.t.Fatalf("%v\n--- script\n%s\n--- output\n%s\n--- agent log\n%s\n--- controller log\n%s",
			err, script, out, in.log("agent"), in.log("controller"))
	}
	return string(out)
}

func (in *install) log(name string) string {
	b, _ := os.ReadFile(filepath.Join(in.fg, "run", name+".log"))
	return string(b)
}

func (in *install) write(name, text string) {
	if err := os.WriteFile(filepath.Join(in.fg, name), []byte(text), 0o600); err != nil {
		in.t.Fatal(err)
	}
}

// setUp writes the configs in the layout the runbook expects and starts
// agent (with the embedded broker) and controller.
func (in *install) setUp() {
	fg, port := in.fg, strings.TrimPrefix(in.broker, "tcp://127.0.0.1:")
	in.sh(`controller keygen --dir "$FG/keys/current"`)
	in.write("agent.yaml", fmt.Sprintf(`agent:
  id: gw1
  data_dir: %[1]s/data/agent
mqtt:
  listen: 127.0.0.1:%[2]s
trust:
  keys: [%[1]s/keys/current/controller.pub]
http:
  listen: "off"
devices:
  - id: press1
    domain: line1-press
    driver: sim
    settings: {log: %[1]s/run/press1.log}
`, fg, port))
	in.write("controller.yaml", fmt.Sprintf(`data_dir: %[1]s/data/controller
key: %[1]s/keys/current/controller.key
trust_keys: []
mqtt:
  broker: %[2]s
`, fg, in.broker))
	in.sh(`systemctl start fencegate-agent; systemctl start fencegate-controller`)
	in.t.Cleanup(func() {
		cmd := exec.Command("bash", "-c", `systemctl stop fencegate-controller; systemctl stop fencegate-agent`)
		cmd.Env = in.env
		if out, err := cmd.CombinedOutput(); err != nil {
			in.t.Errorf("stop: %v\n%s", err, out)
		}
	})
}

// runbook is the shell block after the runbook marker in docs/operations.md.
func runbook(t *testing.T) string {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- runbook:rotate-keys[^>]*-->\\s*```sh\\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/operations.md has no rotate-keys runbook block")
	}
	return string(m[1])
}

// sender holds a lease and sends a command every 50 ms until stopped,
// keeping every result that was not applied.
type sender struct {
	lease *supervisor.Lease
	stop  chan struct{}
	wg    sync.WaitGroup

	mu   sync.Mutex // guards the fields below
	sent int
	bad  []string
	keys map[string]int // key id of the token each applied command carried
}

func startSender(t *testing.T, broker string) *sender {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dialSup(t, broker, "line1-sup-a", mqtt.TLS{})
	var l *supervisor.Lease
	waitUntil(t, "first lease", func() bool {
		var err error
		l, err = c.Acquire(ctx, "line1-press", supervisor.AcquireOptions{TTL: 5 * time.Second})
		return err == nil
	})
	s := &sender{lease: l, stop: make(chan struct{}), keys: map[string]int{}}
	s.wg.Go(s.run)
	return s
}

func (s *sender) run() {
	for i := 0; ; i++ {
		select {
		case <-s.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		key := s.lease.Fence().KeyID.String()
		r, err := s.lease.Send(ctx, "press1", "set", map[string]int{"value": i})
		cancel()
		s.record(key, r, err)
	}
}

func (s *sender) record(key string, r protocol.Result, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent++
	if err != nil || r.Status != protocol.StatusApplied {
		s.bad = append(s.bad, fmt.Sprintf("%s %s %s %v", r.Status, r.Code, r.Message, err))
		return
	}
	s.keys[key]++
}

func (s *sender) finish() (sent int, bad []string, keys map[string]int) {
	close(s.stop)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent, s.bad, s.keys
}

// TestRotationRunbook runs docs/operations.md's rotation runbook as
// written, against real controller and agent processes, while a
// supervisor holds a lease and keeps sending.
func TestRotationRunbook(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to build the binaries")
	}
	in := newInstall(t)
	in.setUp()
	s := startSender(t, in.broker)
	oldKey := s.lease.Fence().KeyID.String()
	oldToken := s.lease.Token()
	time.Sleep(500 * time.Millisecond) // some commands under the old key
	in.sh(runbook(t), "MAX_TTL=6", "DOMAINS=line1-press", "FENCECTL_FLAGS=--broker "+in.broker)
	time.Sleep(time.Second) // and some after
	sent, bad, keys := s.finish()
	newPub, err := fence.LoadPublicKey(filepath.Join(in.fg, "keys/next/controller.pub"))
	if err != nil {
		t.Fatal(err)
	}
	newKey := fence.KeyIDOf(newPub).String()
	t.Logf("%d commands sent; applied by key: %v (old %s, new %s)", sent, keys, oldKey, newKey)
	switch {
	case len(bad) > 0:
		t.Fatalf("%d of %d commands not applied during the rotation: %q", len(bad), sent, bad)
	case s.lease.Err() != nil:
		t.Fatalf("lease lost during the rotation: %v", s.lease.Err())
	case keys[oldKey] == 0 || keys[newKey] == 0:
		t.Fatalf("applied by key %v: want commands under both the old and the new key", keys)
	case s.lease.Fence().KeyID.String() != newKey:
		t.Fatalf("the lease ends signed by %s, want the new key %s", s.lease.Fence().KeyID, newKey)
	}
	for _, name := range []string{"agent", "controller"} {
		if strings.Contains(in.log(name), "unknown key id") {
			t.Fatalf("%s logged an unknown key id:\n%s", name, in.log(name))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dialSup(t, in.broker, "checker", mqtt.TLS{})
	r, _ := c.SendToken(ctx, oldToken, "press1", "set", map[string]int{"value": -1})
	if r.Code != protocol.CodeInvalidToken {
		t.Fatalf("old key's token after the rotation: %s %s (%s), want invalid_token (the old key is removed)", r.Status, r.Code, r.Message)
	}
	if err := s.lease.Release(ctx); err != nil {
		t.Fatalf("release after the rotation: %v", err)
	}
}
