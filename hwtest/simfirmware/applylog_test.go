package simfirmware

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices/frame"
	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/transport/serial"
)

// running is a simulator started with Run in this process.
type running struct {
	stdin *io.PipeWriter
	lines chan string // its output lines
	done  chan error  // Run's result
}

// startRun runs the simulator with args until the test ends and waits for
// its "ready" line.
func startRun(t *testing.T, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &running{stdin: inW, lines: make(chan string, 16), done: make(chan error, 1)}
	go func() {
		err := Run(ctx, args, inR, outW)
		outW.Close()
		r.done <- err
	}()
	go func() {
		defer close(r.lines)
		for sc := bufio.NewScanner(outR); sc.Scan(); {
			r.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { cancel(); inW.Close(); inR.Close() })
	if line := r.next(t); !strings.HasPrefix(line, "ready ") {
		t.Fatalf("first output line %q, want ready <node>", line)
	}
	return r
}

// next is the simulator's next output line.
func (r *running) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-r.lines:
		if !ok {
			t.Fatalf("simulator output ended: %v", <-r.done)
		}
		return line
	case <-time.After(30 * time.Second):
		t.Fatal("no output from the simulator")
	}
	return ""
}

// stop closes the simulator's control input and checks that Run returns nil.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.stdin.Close()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its input ended")
	}
}

// exchange sends req to the firmware on p and returns its reply.
func exchange(t *testing.T, p *serial.Port, req frame.Request) frame.Reply {
	t.Helper()
	msg, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(serial.EncodeFrame(msg), time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	dec := serial.NewFrameDecoder(frame.MaxEncoded)
	buf := make([]byte, 4096)
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
		n, err := p.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		var got []serial.Msg
		dec.Feed(buf[:n], func(m serial.Msg) { got = append(got, m) })
		if len(got) > 0 {
			rep, err := frame.ParseReply(got[0].Data)
			if got[0].Err != nil || err != nil || rep.ID != req.ID {
				t.Fatalf("reply to %q: %+v, %v, %v", req.ID, rep, got[0].Err, err)
			}
			return rep
		}
	}
	t.Fatalf("no reply to %q", req.ID)
	return frame.Reply{}
}

// TestApplyLogFrame: over a real pseudo-terminal, an applied frame command
// is logged once with its token position, holder and args under the
// default device id (the link's base name), and neither a stale command, a
// repeat of the applied id, nor an unknown op adds a line; sim.ReadLog
// reads the file and sim.CheckLog accepts it.
func TestApplyLogFrame(t *testing.T) {
	dir := t.TempDir()
	link, logPath := filepath.Join(dir, "fw0"), filepath.Join(dir, "fw0.log")
	r := startRun(t, "--protocol", "frame", "--link", link, "--state", filepath.Join(dir, "fw0.state"), "--log", logPath)
	p, err := serial.OpenPort(serial.Config{Path: link})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().UTC()
	applied := frame.Request{ID: "c1", Domain: "plant", Epoch: 3, Seq: 7, Holder: "sup-a", Op: "set", Args: []byte(`{ "value": 42 }`)}
	steps := []struct {
		req  frame.Request
		want frame.Status
	}{
		{applied, frame.StatusApplied},
		{frame.Request{ID: "c2", Domain: "plant", Epoch: 3, Seq: 6, Holder: "sup-b", Op: "set", Args: []byte(`{"value":1}`)}, frame.StatusStale},
		{applied, frame.StatusApplied}, // answered from the reply cache
		{frame.Request{ID: "c3", Domain: "plant", Epoch: 3, Seq: 8, Holder: "sup-a", Op: "explode"}, frame.StatusUnknownOp},
	}
	for _, s := range steps {
		if rep := exchange(t, p, s.req); rep.Status != s.want {
			t.Fatalf("%s at %d.%d: status %v, want %v", s.req.ID, s.req.Epoch, s.req.Seq, rep.Status, s.want)
		}
	}
	after := time.Now().UTC()
	p.Close()
	r.stop(t)

	entries, err := sim.ReadLog(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("log has %d entries, want 1 (only the applied command): %+v", len(entries), entries)
	}
	e := entries[0]
	want := sim.Entry{Device: "fw0", ID: "c1", Op: "set", Domain: "plant", Epoch: 3, Seq: 7, Holder: "sup-a",
		Args: []byte(`{"value":42}`), Started: e.Started, At: e.At}
	if e.Device != want.Device || e.ID != want.ID || e.Op != want.Op || e.Idempotent || e.Domain != want.Domain ||
		e.Epoch != want.Epoch || e.Seq != want.Seq || e.Holder != want.Holder || string(e.Args) != string(want.Args) {
		t.Fatalf("entry %+v, want %+v", e, want)
	}
	if e.Started.Before(before) || e.At.Before(e.Started) || e.At.After(after) {
		t.Fatalf("started %v, at %v: want %v <= started <= at <= %v", e.Started, e.At, before, after)
	}
	if err := sim.CheckLog(entries); err != nil {
		t.Fatalf("CheckLog: %v", err)
	}
}

// TestApplyLogLine: the line firmware logs SET and PULSE, which apply,
// with no token and the parameters as received, under the --device id; a
// refused SET (read-only channel) and a GET? (which applies nothing) are
// not logged; a second firmware appends to the same file.
func TestApplyLogLine(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "ln.log")
	for _, lines := range [][]string{{"SET 1 on", "SET 8 x", "GET? 1"}, {"PULSE 2 0", "set 3 off"}} {
		o, err := parseFlags([]string{"--protocol", "line", "--link", "/nonexistent/ln0", "--log", logPath, "--device", "bench-1"})
		if err != nil {
			t.Fatal(err)
		}
		fw, err := newFirmware(o, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			fw.handleLine(serial.Msg{Data: []byte(l)})
		}
		fw.shutdown()
	}
	entries, err := sim.ReadLog(logPath)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ op, args string }{{"SET", `["1","on"]`}, {"PULSE", `["2","0"]`}, {"SET", `["3","off"]`}}
	if len(entries) != len(want) {
		t.Fatalf("log has %d entries, want %d: %+v", len(entries), len(want), entries)
	}
	for i, e := range entries {
		if e.Device != "bench-1" || e.Op != want[i].op || string(e.Args) != want[i].args || e.ID != "" ||
			e.Domain != "" || e.Epoch != 0 || e.Seq != 0 || e.Holder != "" || e.Started.IsZero() || e.At.Before(e.Started) {
			t.Errorf("entry %d = %+v, want device bench-1, op %s, args %s, no token", i, e, want[i].op, want[i].args)
		}
	}
}

// TestDeviceDefault: --device defaults to the base name of --link or
// --port, and is taken as given otherwise.
func TestDeviceDefault(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--link", "/tmp/sims/fw0"}, "fw0"},
		{[]string{"--port", "/dev/ttyUSB1"}, "ttyUSB1"},
		{[]string{"--link", "/tmp/fw0", "--device", "plant-valve"}, "plant-valve"},
	} {
		o, err := parseFlags(tt.args)
		if err != nil || o.device != tt.want {
			t.Errorf("parseFlags(%q): device %q, %v; want %q", tt.args, o.device, err, tt.want)
		}
	}
}

// TestRunBadFlags: Run refuses bad flags, and a log it cannot open, with
// an error and without serving.
func TestRunBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--protocol", "morse", "--link", filepath.Join(dir, "a")},
		{"--link", filepath.Join(dir, "b"), "--port", "/dev/null"},
		{"--link", filepath.Join(dir, "c"), "--log", filepath.Join(dir, "no", "x.log")},
	} {
		var out strings.Builder
		err := Run(context.Background(), args, strings.NewReader(""), &out)
		if err == nil || out.Len() != 0 {
			t.Errorf("Run(%q) = %v with output %q; want an error and no output", args, err, out.String())
		}
	}
	err := Run(context.Background(), []string{"--link", filepath.Join(dir, "d"), "--log", filepath.Join(dir, "no", "x.log")},
		strings.NewReader(""), io.Discard)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Run with a log in a missing directory = %v, want a wrapped not-exist error", err)
	}
}
