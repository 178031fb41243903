package simfirmware

import (
	"bytes"
	"io"
	"testing"

	"github.com/fencegate/fencegate/devices/frame"
	"github.com/fencegate/fencegate/transport/serial"
)

// FuzzLineParser: any byte stream on a line-protocol firmware is survived;
// every line that is not garbage gets exactly one reply line, and a reply
// is OK, VAL, ERR or the identification.
func FuzzLineParser(f *testing.F) {
	for _, s := range []string{"SET 1 on\n", "   \n", "GET? 9\r\nPULSE 1 -5\n", "*IDN?\nset\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fw := newFuzzFirmware(t, "line")
		dec := serial.NewLineDecoder(1024)
		dec.Feed(in, func(m serial.Msg) { checkLineReply(t, m, fw) })
		fw.handleLine(serial.Msg{Data: in}) // raw, as a decoder never hands it: must not panic
	})
}

func checkLineReply(t *testing.T, m serial.Msg, fw *firmware) {
	reply, _ := fw.handleLine(m)
	switch {
	case m.Err != nil && reply != nil:
		t.Fatalf("garbage %q answered %q", m.Data, reply)
	case m.Err != nil:
	case !bytes.HasSuffix(reply, []byte("\r\n")) || bytes.Count(reply, []byte("\n")) != 1:
		t.Fatalf("line %q answered %q, want one line", m.Data, reply)
	case !hasAnyPrefix(reply, "OK", "VAL ", "ERR ", "FENCEGATE,"):
		t.Fatalf("line %q answered %q", m.Data, reply)
	}
}

func hasAnyPrefix(b []byte, prefixes ...string) bool {
	for _, p := range prefixes {
		if bytes.HasPrefix(b, []byte(p)) {
			return true
		}
	}
	return false
}

// FuzzFrameParser: any byte stream on a frame-protocol firmware is
// survived; a bad frame gets no answer, a good one exactly one valid reply
// with its id, and the firmware's fence never goes down.
func FuzzFrameParser(f *testing.F) {
	good, _ := frame.Request{ID: "c1", Domain: "d", Epoch: 1, Seq: 2, Holder: "h", Op: "set", Args: []byte(`{"value":1}`)}.Marshal()
	f.Add(serial.EncodeFrame(good))
	f.Add(append(serial.EncodeFrame(good)[:9], serial.EncodeFrame(good)...))
	f.Add([]byte("\x00\xff\x01\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		fw := newFuzzFirmware(t, "frame")
		dec := serial.NewFrameDecoder(frame.MaxEncoded)
		dec.Feed(in, func(m serial.Msg) { checkFrameReply(t, m, fw) })
	})
}

func checkFrameReply(t *testing.T, m serial.Msg, fw *firmware) {
	before := fw.fences["d"]
	reply, _ := fw.handleFrame(m)
	req, err := frame.ParseRequest(m.Data)
	if m.Err != nil || err != nil {
		if reply != nil {
			t.Fatalf("bad frame % x answered", m.Data)
		}
		return
	}
	if len(reply) < 2 || reply[0] != 0 || reply[len(reply)-1] != 0 {
		t.Fatalf("request %+v answered % x, want one frame", req, reply)
	}
	payload, err := serial.DecodeFrame(reply[1 : len(reply)-1])
	if err != nil {
		t.Fatalf("reply frame: %v", err)
	}
	if rep, err := frame.ParseReply(payload); err != nil || rep.ID != req.ID {
		t.Fatalf("reply %+v, %v to request %q", rep, err, req.ID)
	}
	if after := fw.fences["d"]; after.Epoch < before.Epoch || after.Epoch == before.Epoch && after.Seq < before.Seq {
		t.Fatalf("fence went down: %+v → %+v", before, after)
	}
}

// newFuzzFirmware is a firmware with no wire and no state file.
func newFuzzFirmware(t *testing.T, protocol string) *firmware {
	fw, err := newFirmware(options{protocol: protocol}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return fw
}
