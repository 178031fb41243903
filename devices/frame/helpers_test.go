package frame

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/transport/serial"
)

// firmware is a scripted protocol v1 peer on the master side of a real
// pseudo-terminal: answer turns each request into the bytes to write back.
type firmware struct {
	path string
	reqs chan Request
}

func newFirmware(t *testing.T, answer func(Request) []byte) *firmware {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("pseudo-terminals (/dev/ptmx) unavailable: %v", err)
	}
	fw := &firmware{path: slave.Name(), reqs: make(chan Request, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		dec := serial.NewFrameDecoder(MaxEncoded)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			if err != nil {
				return
			}
			dec.Feed(buf[:n], func(m serial.Msg) {
				if req, err := ParseRequest(m.Data); m.Err == nil && err == nil {
					fw.reqs <- req
					master.Write(answer(req))
				}
			})
		}
	}()
	t.Cleanup(func() {
		slave.Close()
		master.Close()
		<-done
	})
	return fw
}

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
