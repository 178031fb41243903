package frame

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/transport/serial"
)

// firmware is a scripted protocol v1 peer on the master side of a real
// pseudo-terminal: answer turns each request into the bytes to write back.
// A paused firmware reads nothing until resume.
type firmware struct {
	path          string
	reqs          chan Request
	master, slave *os.File // the test keeps the slave open to fill the line
	done          chan struct{}
	resumed       bool // set by resume, on the test's goroutine

	mu  sync.Mutex // guards raw
	raw []byte     // every byte read from the master
}

func newFirmware(t *testing.T, answer func(Request) []byte) *firmware {
	t.Helper()
	fw := newPausedFirmware(t)
	fw.resume(answer)
	return fw
}

// newPausedFirmware is a firmware that reads nothing until resume.
func newPausedFirmware(t *testing.T) *firmware {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("pseudo-terminals (/dev/ptmx) unavailable: %v", err)
	}
	fw := &firmware{path: slave.Name(), reqs: make(chan Request, 64), master: master, slave: slave, done: make(chan struct{})}
	t.Cleanup(func() {
		slave.Close()
		master.Close()
		if fw.resumed {
			<-fw.done
		}
	})
	return fw
}

// stall fills the line toward the firmware with more zero bytes (empty
// frames) than the master's receive buffer holds, so that what the driver
// writes next waits in the kernel's queue, as on a line whose CTS is low.
func (fw *firmware) stall(t *testing.T) {
	t.Helper()
	if _, err := fw.slave.Write(make([]byte, 8<<10)); err != nil {
		t.Fatal(err)
	}
	// The kernel moves the bytes into the master's receive buffer in the
	// background; until it has, a flush could discard the filler instead.
	last, same := -1, 0
	for end := time.Now().Add(10 * time.Second); same < 5; time.Sleep(5 * time.Millisecond) {
		n, err := unix.IoctlGetInt(int(fw.master.Fd()), unix.TIOCINQ)
		switch {
		case err != nil:
			t.Skipf("cannot watch the pseudo-terminal's receive buffer (TIOCINQ): %v", err)
		case time.Now().After(end):
			t.Fatalf("the master's receive buffer did not settle (%d bytes)", n)
		case n > 0 && n == last:
			same++
		default:
			last, same = n, 0
		}
	}
}

// resume starts reading and answering.
func (fw *firmware) resume(answer func(Request) []byte) {
	fw.resumed = true
	go func() {
		defer close(fw.done)
		dec := serial.NewFrameDecoder(MaxEncoded)
		buf := make([]byte, 4096)
		for {
			n, err := fw.master.Read(buf)
			if err != nil {
				return
			}
			fw.record(buf[:n])
			dec.Feed(buf[:n], func(m serial.Msg) {
				if req, err := ParseRequest(m.Data); m.Err == nil && err == nil {
					fw.reqs <- req
					fw.master.Write(answer(req))
				}
			})
		}
	}()
}

func (fw *firmware) record(b []byte) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.raw = append(fw.raw, b...)
}

// received returns every byte read from the line so far.
func (fw *firmware) received() []byte {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return bytes.Clone(fw.raw)
}

// applyAll answers every request as applied.
func applyAll(r Request) []byte { return reply(r, StatusApplied, "") }

// reply encodes a framed reply to req.
func reply(req Request, st Status, body string) []byte {
	b, err := Reply{ID: req.ID, Status: st, Epoch: req.Epoch, Seq: req.Seq, Holder: req.Holder, Body: []byte(body)}.Marshal()
	if err != nil {
		panic(err)
	}
	return serial.EncodeFrame(b)
}

func mustOpen(t *testing.T, path string) *Device {
	t.Helper()
	d, err := Open("fw", Config{Port: serial.Config{Path: path, ReadTimeout: 20 * time.Millisecond,
		ReopenMin: 10 * time.Millisecond, ReopenMax: 50 * time.Millisecond}}, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func cmd(id, op, args string, seq uint64) devices.Command {
	c := devices.Command{ID: id, Op: op, Token: fence.Token{Domain: "plant", Epoch: 7, Seq: seq, Holder: "sup-a", TTLms: 1000}}
	if args != "" {
		c.Args = json.RawMessage(args)
	}
	return c
}

func apply(d *Device, c devices.Command, timeout time.Duration) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.Apply(ctx, c)
}

func errOf(err error) *devices.Error {
	var e *devices.Error
	if errors.As(err, &e) {
		return e
	}
	return &devices.Error{}
}
