package line

import (
	"io"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/transport/serial"
)

// TestSettleWaitsForSilentBytes: after a request got no reply in time, its
// late reply trickles in slower than a line's worth per settle period but
// with no byte-free gap that long. The driver must wait for the line to
// carry no byte for the settle period — not merely no complete line — or
// its flush cuts the late reply in two and the tail ("6789") is taken for
// the next request's answer.
func TestSettleWaitsForSilentBytes(t *testing.T) {
	n := 0
	in := newScriptedInstrument(t, func(l string, w io.Writer) {
		if n++; n > 1 {
			w.Write([]byte("5678\r\n"))
			return
		}
		time.Sleep(150 * time.Millisecond) // past the first request's deadline
		for _, b := range []byte("123456789\r\n") {
			w.Write([]byte{b})
			time.Sleep(60 * time.Millisecond)
		}
	})
	cfg := Config{Port: serial.Config{Path: in.path, ReadTimeout: 20 * time.Millisecond, ReopenMin: 10 * time.Millisecond, ReopenMax: 50 * time.Millisecond},
		Settle: 300 * time.Millisecond,
		Ops:    []OpConfig{{Name: "meas", Request: "MEAS?", OK: `^(?P<value>-?\d+)$`, Idempotent: true}}}
	d := mustOpen(t, cfg)
	if _, err := apply(d, "meas", "", 100*time.Millisecond); devices.CodeOf(err) != devices.CodeInDoubt {
		t.Fatalf("first request without a reply in time: %v, want in_doubt", err)
	}
	out, err := apply(d, "meas", "", 10*time.Second)
	if err != nil || string(out) != `{"reply":"5678","value":"5678"}` {
		t.Fatalf("second request: %s, %v; want its own reply 5678", out, err)
	}
}
