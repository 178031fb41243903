package line

import (
	"io"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/transport/serial"
)

// TestLateReplyDoesNotAnswerNextRequest: the device answers a request only
// after the next one arrived, so its late reply comes just before the next
// request's own. The request that got no reply in time is in_doubt (its
// bytes went out), and the next one is in_doubt too — two replies, and the
// driver cannot tell which is its — never applied on the late OK, nor
// failed on the late ERR.
func TestLateReplyDoesNotAnswerNextRequest(t *testing.T) {
	const okLine, errLine = "OK\r\n", "ERR -221 channel 8 is read-only\r\n"
	tests := []struct {
		name               string
		first, firstArgs   string
		second, secondArgs string
		replies            string // written when the second request arrives
	}{
		{"late OK before ERR", "SET 1 on", `{"ch":1,"value":"on"}`, "SET 8 x", `{"ch":8,"value":"x"}`, okLine + errLine},
		{"late ERR before OK", "SET 8 x", `{"ch":8,"value":"x"}`, "SET 1 on", `{"ch":1,"value":"on"}`, errLine + okLine},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := newInstrument(t, map[string]string{tt.second: tt.replies})
			d := mustOpen(t, testConfig(in.path))
			if _, err := apply(d, "set", tt.firstArgs, 300*time.Millisecond); devices.CodeOf(err) != devices.CodeInDoubt {
				t.Fatalf("%s got no reply in time: %v, want in_doubt", tt.first, err)
			}
			out, err := apply(d, "set", tt.secondArgs, 10*time.Second)
			if devices.CodeOf(err) != devices.CodeInDoubt {
				t.Fatalf("%s answered %s, %v; want in_doubt (the first reply was the late one)", tt.second, out, err)
			}
			if a, b := in.next(t), in.next(t); a != tt.first || b != tt.second {
				t.Fatalf("device received %q, %q", a, b)
			}
		})
	}
}

// TestTimeoutSettlesBeforeNextRequest: after a request got no reply in
// time, the driver waits until the device has been silent for the settle
// period before it sends the next request, so a late reply that keeps
// coming is drained, not taken for the next request's answer.
func TestTimeoutSettlesBeforeNextRequest(t *testing.T) {
	in := newScriptedInstrument(t, func(l string, w io.Writer) {
		switch l {
		case "SET 1 on": // busy for a while, then the late OK
			for range 20 {
				w.Write([]byte("#BUSY\r\n"))
				time.Sleep(10 * time.Millisecond)
			}
			w.Write([]byte("OK\r\n"))
		case "SET 8 x":
			w.Write([]byte("ERR -221 channel 8 is read-only\r\n"))
		}
	})
	cfg := testConfig(in.path)
	cfg.Settle = 500 * time.Millisecond
	d := mustOpen(t, cfg)
	if _, err := apply(d, "set", `{"ch":1,"value":"on"}`, 50*time.Millisecond); devices.CodeOf(err) != devices.CodeInDoubt {
		t.Fatalf("busy request: %v, want in_doubt", err)
	}
	_, err := apply(d, "set", `{"ch":8,"value":"x"}`, 20*time.Second)
	if devices.CodeOf(err) != devices.CodeDeviceError {
		t.Fatalf("next request: %v, want its own device_error (the late OK drained)", err)
	}
}

// TestPartialWriteIsInDoubt: a send that failed after the port took some
// of the request may have reached the device; one that failed before it
// took any did not.
func TestPartialWriteIsInDoubt(t *testing.T) {
	d := &Device{}
	if err := d.sendFailed(0, 9, serial.ErrWriteTimeout); devices.CodeOf(err) != devices.CodeDeviceTimeout || d.suspect {
		t.Fatalf("nothing taken: %v (suspect %v), want device_timeout", err, d.suspect)
	}
	if err := d.sendFailed(4, 9, serial.ErrWriteTimeout); devices.CodeOf(err) != devices.CodeInDoubt || !d.suspect {
		t.Fatalf("part taken: %v (suspect %v), want in_doubt", err, d.suspect)
	}
}
