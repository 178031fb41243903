package modbus

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/transport/serial"
)

// TestCRC16 checks the CRC against frames from the Modbus serial line
// specification and vendor manuals.
func TestCRC16(t *testing.T) {
	tests := []struct {
		name  string
		frame []byte
		wire  [2]byte // CRC as sent: low byte first
	}{
		{"read 10 holding from unit 1", []byte{0x01, 0x03, 0x00, 0x00, 0x00, 0x0A}, [2]byte{0xC5, 0xCD}},
		{"read 2 holding at 107 from unit 17", []byte{0x11, 0x03, 0x00, 0x6B, 0x00, 0x03}, [2]byte{0x76, 0x87}},
		{"write coil 172 of unit 17 on", []byte{0x11, 0x05, 0x00, 0xAC, 0xFF, 0x00}, [2]byte{0x4E, 0x8B}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			adu := EncodeRTU(tt.frame[0], PDU{Function: tt.frame[1], Data: tt.frame[2:]})
			if got := adu[len(adu)-2:]; !bytes.Equal(got, tt.wire[:]) {
				t.Fatalf("CRC on the wire % x, want % x", got, tt.wire)
			}
		})
	}
}

// collect feeds chunks to d, one Feed each, and returns the frames and
// the garbage reports.
func collect(d *RTUDecoder, chunks ...[]byte) (frames [][]byte, garbage int) {
	for _, c := range chunks {
		d.Feed(c, func(m serial.Msg) {
			if m.Err != nil {
				garbage++
				return
			}
			frames = append(frames, m.Data)
		})
	}
	return frames, garbage
}

func TestRTUDecoder(t *testing.T) {
	readResp := EncodeRTU(1, PDU{Function: FuncReadHolding, Data: []byte{4, 0, 1, 0, 2}})
	writeResp := EncodeRTU(1, PDU{Function: FuncWriteRegisters, Data: []byte{0, 10, 0, 2}})
	excResp := EncodeRTU(1, PDU{Function: FuncWriteRegisters | 0x80, Data: []byte{2}})
	bad := append([]byte(nil), writeResp...)
	bad[len(bad)-1] ^= 1
	tests := []struct {
		name    string
		chunks  [][]byte
		frames  [][]byte
		garbage bool // reported at least once
	}{
		{"whole", [][]byte{readResp}, [][]byte{readResp[:len(readResp)-2]}, false},
		{"byte by byte", split(readResp, 1), [][]byte{readResp[:len(readResp)-2]}, false},
		{"two in one read", [][]byte{append(append([]byte(nil), writeResp...), excResp...)}, [][]byte{writeResp[:6], excResp[:3]}, false},
		{"noise before", [][]byte{{0x00, 0xFF, 0x42}, readResp}, [][]byte{readResp[:len(readResp)-2]}, true},
		{"noise glued to the front", [][]byte{append([]byte{0x07, 0x02, 0xF0}, writeResp...)}, [][]byte{writeResp[:6]}, true},
		{"bad CRC skipped, next found", [][]byte{bad, writeResp}, [][]byte{writeResp[:6]}, true},
		{"unknown function skipped", [][]byte{{0x01, 0x2B}, excResp}, [][]byte{excResp[:3]}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frames, garbage := collect(NewRTUDecoder(Responses, 0), tt.chunks...)
			if len(frames) != len(tt.frames) || (garbage > 0) != tt.garbage {
				t.Fatalf("frames % x, %d garbage reports; want % x, reported %v", frames, garbage, tt.frames, tt.garbage)
			}
			for i := range frames {
				if !bytes.Equal(frames[i], tt.frames[i]) {
					t.Fatalf("frame %d % x, want % x", i, frames[i], tt.frames[i])
				}
			}
		})
	}
}

func split(b []byte, n int) [][]byte {
	var out [][]byte
	for len(b) > n {
		out = append(out, b[:n])
		b = b[n:]
	}
	return append(out, b)
}

// TestRTUDecoderGap: an incomplete frame followed by more than the gap
// of silence is dropped, so the frame after it is read from its start;
// within the gap the pieces join.
func TestRTUDecoderGap(t *testing.T) {
	resp := EncodeRTU(1, PDU{Function: FuncWriteRegister, Data: []byte{0, 1, 0, 2}})
	var now time.Time
	d := NewRTUDecoder(Responses, 20*time.Millisecond)
	d.now = func() time.Time { return now }
	now = time.Unix(100, 0)
	frames, garbage := collect(d, resp[:5]) // a late response, cut
	now = now.Add(50 * time.Millisecond)
	f2, g2 := collect(d, resp)
	if len(frames)+len(f2) != 1 || garbage+g2 != 1 || !bytes.Equal(f2[0], resp[:6]) {
		t.Fatalf("frames % x then % x, garbage %d+%d; want the second frame whole and one report", frames, f2, garbage, g2)
	}
	now = now.Add(50 * time.Millisecond)
	f3, _ := collect(d, resp[:3])
	now = now.Add(10 * time.Millisecond)
	f4, _ := collect(d, resp[3:])
	if len(f3) != 0 || len(f4) != 1 {
		t.Fatalf("a frame in two pieces 10ms apart: % x, % x; want it joined", f3, f4)
	}
	if !d.LastInput().Equal(now) {
		t.Fatalf("LastInput %v, want %v", d.LastInput(), now)
	}
}

// TestRTURequestLengths: the server side frames requests by their own
// lengths (FC 15/16 carry a byte count).
func TestRTURequestLengths(t *testing.T) {
	reqs := []PDU{readRequest(FuncReadCoils, 1, 8), writeCoilRequest(3, true), writeRegistersRequest(10, []uint16{1, 2, 3}),
		writeCoilsRequest(7, []bool{true, false, true})}
	var stream []byte
	for _, r := range reqs {
		stream = append(stream, EncodeRTU(9, r)...)
	}
	frames, garbage := collect(NewRTUDecoder(Requests, 0), split(stream, 3)...)
	if len(frames) != len(reqs) || garbage != 0 {
		t.Fatalf("%d frames, %d garbage, want %d and 0", len(frames), garbage, len(reqs))
	}
	for i, f := range frames {
		unit, p := SplitRTU(f)
		if unit != 9 || p.Function != reqs[i].Function || !bytes.Equal(p.Data, reqs[i].Data) {
			t.Fatalf("frame %d: unit %d %+v, want %+v", i, unit, p, reqs[i])
		}
	}
}

func TestInterFrame(t *testing.T) {
	c := CharTime(9600, 8, "even", "1") // 11 bits
	if want := 11 * time.Second / 9600; c != want {
		t.Fatalf("char time %v, want %v", c, want)
	}
	if got := InterFrame(9600, c); got != c*7/2 {
		t.Fatalf("t3.5 at 9600 baud %v, want %v", got, c*7/2)
	}
	if got := InterFrame(115200, CharTime(115200, 8, "none", "2")); got != 1750*time.Microsecond {
		t.Fatalf("t3.5 above 19200 baud %v, want 1.75ms", got)
	}
}

func TestResponseChecks(t *testing.T) {
	req := readRequest(FuncReadHolding, 100, 2)
	if _, err := parseRegisters(req, PDU{Function: FuncReadHolding, Data: []byte{2, 0, 1}}); !isProtocol(err) {
		t.Fatalf("short read response: %v, want a mismatch", err)
	}
	var exc *ExceptionError
	if _, err := parseRegisters(req, PDU{Function: 0x83, Data: []byte{2}}); !errors.As(err, &exc) || exc.Name() != "illegal data address" {
		t.Fatalf("exception response: %v", err)
	}
	w := writeRegistersRequest(10, []uint16{1, 2})
	if err := checkWriteEcho(w, PDU{Function: FuncWriteRegisters, Data: []byte{0, 10, 0, 3}}); !isProtocol(err) {
		t.Fatalf("echo of another quantity: %v, want a mismatch", err)
	}
	if err := checkWriteEcho(w, PDU{Function: FuncWriteRegisters, Data: []byte{0, 10, 0, 2}}); err != nil {
		t.Fatal(err)
	}
}

func isProtocol(err error) bool {
	var pe *protocolError
	return errors.As(err, &pe)
}
