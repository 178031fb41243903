package simdevice

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/logtest"
	"github.com/fencegate/fencegate/plugins"
)

func tok(seq uint64) fence.Token {
	return fence.Token{Domain: "plant", Epoch: 1, Seq: seq, Holder: "sup", TTLms: 60000}
}

func command(id, op, args string, seq uint64) devices.Command {
	c := devices.Command{ID: id, Op: op, Token: tok(seq)}
	if args != "" {
		c.Args = json.RawMessage(args)
	}
	return c
}

// child is a Config running this test binary as the simdevice plugin,
// with its apply log, fence file and pid file in dir.
func child(t *testing.T, dir, extra string) plugins.Config {
	t.Helper()
	doc := fmt.Sprintf("device: {log: %s, fence_file: %s}\npid_file: %s\n%s",
		filepath.Join(dir, "apply.log"), filepath.Join(dir, "fence"), filepath.Join(dir, "pid"), extra)
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		t.Fatal(err)
	}
	return plugins.Config{Path: os.Args[0], Config: *n.Content[0], PingInterval: 50 * time.Millisecond,
		RestartBackoff: 50 * time.Millisecond, RestartBackoffMax: time.Second}
}

func readPID(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// availability collects a Host's availability reports.
type availability chan bool

func watch(h *plugins.Host) availability {
	a := make(availability, 64)
	h.OnAvailability(func(ok bool, _ string) { a <- ok })
	return a
}

func (a availability) want(t *testing.T, ok bool, rec *logtest.Recorder) {
	t.Helper()
	select {
	case got := <-a:
		if got != ok {
			t.Fatalf("availability report %v, want %v", got, ok)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no availability report (want %v); log:\n%s", ok, rec.Dump())
	}
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
