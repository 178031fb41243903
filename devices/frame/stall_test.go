package frame

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/transport/serial"
)

// TestTimedOutFramesStayInTXQueue: a command whose frame waited in the
// kernel's queue on a stalled line until the reply timeout is in_doubt
// (its bytes were handed to the port), and it never reaches the firmware
// when the line resumes: only the next command does.
func TestTimedOutFramesStayInTXQueue(t *testing.T) {
	fw := newPausedFirmware(t)
	d := mustOpen(t, fw.path)
	fw.stall(t)
	for i, id := range []string{"old-1", "old-2"} {
		_, err := apply(d, cmd(id, "set", `{"value":1}`, uint64(3+i)), 300*time.Millisecond)
		if code := errOf(err).Code; code != devices.CodeInDoubt {
			t.Fatalf("%s on a stalled line: %v, want in_doubt", id, err)
		}
	}
	fw.resume(applyAll)
	if _, err := apply(d, cmd("new", "set", `{"value":2}`, 9), 10*time.Second); err != nil {
		t.Fatalf("after the line resumed: %v", err)
	}
	if r := <-fw.reqs; r.ID != "new" {
		t.Fatalf("firmware received %q (seq %d) first: a timed-out frame was delivered late", r.ID, r.Seq)
	}
	select {
	case r := <-fw.reqs:
		t.Fatalf("firmware also received %q", r.ID)
	default:
	}
}

// TestCutFrameNotCompletedByNext: whatever prefix of an unanswered frame
// reached the firmware before the driver gave up on it, the bytes the
// driver sends for the next command cannot complete it into a valid frame.
func TestCutFrameNotCompletedByNext(t *testing.T) {
	fw := newFirmware(t, func(r Request) []byte {
		if r.ID == "silent" {
			return nil
		}
		return applyAll(r)
	})
	d := mustOpen(t, fw.path)
	old := cmd("silent", "set", `{"value":1}`, 3)
	if _, err := apply(d, old, 300*time.Millisecond); errOf(err).Code != devices.CodeInDoubt {
		t.Fatalf("unanswered command: %v, want in_doubt", err)
	}
	if _, err := apply(d, cmd("next", "set", `{"value":2}`, 4), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	cut, err := request(old)
	if err != nil {
		t.Fatal(err)
	}
	raw := fw.received()
	if !bytes.HasPrefix(raw, cut) {
		t.Fatalf("firmware received % x, want the frame % x first", raw, cut)
	}
	checkCuts(t, cut, raw[len(cut):], "silent")
}

// checkCuts fails t if some proper prefix of the frame cut, followed by
// next, decodes to a request with id.
func checkCuts(t *testing.T, cut, next []byte, id string) {
	t.Helper()
	for k := 1; k < len(cut); k++ {
		dec := serial.NewFrameDecoder(MaxEncoded)
		dec.Feed(append(bytes.Clone(cut[:k]), next...), func(m serial.Msg) {
			if r, err := ParseRequest(m.Data); m.Err == nil && err == nil && r.ID == id {
				t.Errorf("the first %d of %d bytes of %q, then the next request's bytes % x, make %q valid", k, len(cut), id, next, id)
			}
		})
	}
}

// TestPartialWriteIsInDoubt: a send that failed after the port took some
// of the request's bytes may have reached the firmware; one that failed
// before the port took any did not.
func TestPartialWriteIsInDoubt(t *testing.T) {
	frame := serial.EncodeFrame([]byte("request"))
	tests := []struct {
		name    string
		n       int
		err     error
		code    devices.Code
		guarded bool // the next request needs a guard
	}{
		{"nothing taken, timeout", 0, serial.ErrWriteTimeout, devices.CodeDeviceTimeout, false},
		{"nothing taken, port gone", 0, serial.ErrUnavailable, devices.CodeDeviceUnavailable, false},
		{"part taken, timeout", 5, serial.ErrWriteTimeout, devices.CodeInDoubt, true},
		{"part taken, I/O error", 5, errors.New("EIO"), devices.CodeInDoubt, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Device{}
			err := d.sendFailed(frame, tt.n, len(frame), tt.err)
			if code := errOf(err).Code; code != tt.code {
				t.Fatalf("code %q, want %q (%v)", code, tt.code, err)
			}
			if (d.cut != nil) != tt.guarded {
				t.Fatalf("cut = % x, want guarded %v", d.cut, tt.guarded)
			}
		})
	}
}
