package line

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/transport/serial"
)

// instrument is a scripted line device on the master side of a real
// pseudo-terminal: for each request line it writes replies[line] (nothing
// if absent) and records the line.
type instrument struct {
	master *os.File
	path   string
	lines  chan string
}

func newInstrument(t *testing.T, replies map[string]string) *instrument {
	t.Helper()
	return newScriptedInstrument(t, func(l string, w io.Writer) {
		if r, ok := replies[l]; ok {
			w.Write([]byte(r))
		}
	})
}

// newScriptedInstrument is an instrument that calls script for each
// request line, on its reading goroutine, to write the replies.
func newScriptedInstrument(t *testing.T, script func(line string, w io.Writer)) *instrument {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("pseudo-terminals (/dev/ptmx) unavailable: %v", err)
	}
	in := &instrument{master: master, path: slave.Name(), lines: make(chan string, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(master)
		for sc.Scan() {
			l := strings.TrimRight(sc.Text(), "\r")
			in.lines <- l
			script(l, master)
		}
	}()
	t.Cleanup(func() {
		slave.Close()
		master.Close()
		<-done
	})
	return in
}

// next returns the next request line the instrument received.
func (in *instrument) next(t *testing.T) string {
	t.Helper()
	select {
	case l := <-in.lines:
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("instrument received nothing")
		return ""
	}
}

// testConfig is an instrument with set, get and pulse ops.
func testConfig(path string) Config {
	lo, hi := 1.0, 8.0
	ch := ArgConfig{Name: "ch", Type: "int", Min: &lo, Max: &hi}
	return Config{
		Port: serial.Config{Path: path, ReadTimeout: 20 * time.Millisecond, ReopenMin: 10 * time.Millisecond, ReopenMax: 50 * time.Millisecond},
		Ops: []OpConfig{
			{Name: "set", Request: "SET {{.ch}} {{.value}}", OK: `^OK$`, Error: `^ERR (?P<code>-?\d+) (?P<message>.*)$`,
				Args: []ArgConfig{ch, {Name: "value"}}},
			{Name: "get", Request: "GET? {{.ch}}", OK: `^VAL (?P<ch>\d+) (?P<value>\S+)$`, Error: `^ERR (?P<message>.*)$`,
				Args: []ArgConfig{ch}, Idempotent: true},
			{Name: "raw", Request: "{{.text}}", OK: `^OK$`, Args: []ArgConfig{{Name: "text", Pattern: `^.*$`}}},
		},
	}
}

func mustOpen(t *testing.T, cfg Config) *Device {
	t.Helper()
	d, err := Open("ln", cfg, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func apply(d *Device, op, args string, timeout time.Duration) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := devices.Command{ID: "c1", Op: op}
	if args != "" {
		c.Args = json.RawMessage(args)
	}
	return d.Apply(ctx, c)
}

func yamlNode(t *testing.T, doc string) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		t.Fatal(err)
	}
	return n.Content[0]
}
