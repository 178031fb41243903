package modbus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/fencegate/fencegate/transport/serial"
)

// FuzzRTUDecoder: whatever arrives, in whatever pieces, the frame reader
// does not panic, emits only frames that were on the line with a valid
// CRC and a length their function code allows, and after a silence longer
// than the gap reads the next valid frame whole.
func FuzzRTUDecoder(f *testing.F) {
	f.Add(EncodeRTU(1, PDU{Function: FuncReadHolding, Data: []byte{2, 0, 7}}), 3, false)
	f.Add(append([]byte{0x01, 0x03, 0xFA}, EncodeRTU(1, PDU{Function: 0x90, Data: []byte{2}})...), 1, false)
	f.Add([]byte{0x11, 0x10, 0x00, 0x01, 0x00, 0x02, 0x04, 1, 2, 3, 4, 0xAA, 0xBB}, 5, true)
	next := EncodeRTU(7, PDU{Function: FuncWriteRegister, Data: []byte{0, 1, 0, 2}})
	f.Fuzz(func(t *testing.T, data []byte, piece int, requests bool) {
		side := Responses
		if requests {
			side = Requests
		}
		now := time.Unix(1, 0)
		d := NewRTUDecoder(side, 10*time.Millisecond)
		d.now = func() time.Time { return now }
		var frames [][]byte
		emit := func(m serial.Msg) {
			if m.Err == nil {
				frames = append(frames, m.Data)
			}
		}
		for _, p := range split(data, max(1, piece%64)) {
			d.Feed(p, emit)
		}
		for _, fr := range frames {
			checkFrame(t, side, fr, data)
		}
		if side == Requests {
			return
		}
		frames = frames[:0]
		now = now.Add(time.Second)
		d.Feed(next, emit)
		if len(frames) == 0 || !bytes.Equal(frames[len(frames)-1], next[:len(next)-2]) {
			t.Fatalf("after silence, frames % x; want the next frame % x last", frames, next[:len(next)-2])
		}
	})
}

func checkFrame(t *testing.T, side Side, fr, data []byte) {
	t.Helper()
	unit, p := SplitRTU(fr)
	wire := EncodeRTU(unit, p)
	if !bytes.Contains(data, wire) {
		t.Fatalf("frame % x (wire % x) was not on the line % x", fr, wire, data)
	}
	if n, err := frameLen(side, wire); err != nil || n != len(wire) {
		t.Fatalf("frame % x: length %d, %v for its function", fr, n, err)
	}
}

// FuzzPointDecode: any register words decode to valid JSON for every
// type, word order, scale and offset, and for integer types the value
// read encodes back to the same words.
func FuzzPointDecode(f *testing.F) {
	f.Add(uint8(0), false, uint16(0xFFFF), uint16(0), uint8(1))
	f.Add(uint8(4), true, uint16(0x7FC0), uint16(0x0001), uint8(0))
	f.Add(uint8(3), false, uint16(0x8000), uint16(0), uint8(3))
	types := []string{TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeFloat32}
	scales := []struct{ scale, offset float64 }{{1, 0}, {0.1, 0}, {0.01, -40}, {10, 5}, {0.5, 0}}
	f.Fuzz(func(t *testing.T, typ uint8, lowFirst bool, w0, w1 uint16, sc uint8) {
		s := scales[int(sc)%len(scales)]
		p := Point{Name: "p", Table: Holding, Type: types[int(typ)%len(types)], LowFirst: lowFirst, Scale: s.scale, Offset: s.offset}
		w := []uint16{w0, w1}[:p.Words()]
		out := p.DecodeWords(w)
		if !json.Valid(out) {
			t.Fatalf("%s %v: %s is not JSON", p.Type, w, out)
		}
		if p.Type == TypeFloat32 && !roundTrips(p, w) {
			return
		}
		back, err := p.EncodeWords(out)
		if err != nil || fmt.Sprint(back) != fmt.Sprint(w) {
			t.Fatalf("%s scale %v: words %04x read %s, encode back %04x, %v", p.Type, p.Scale, w, out, back, err)
		}
	})
}

// roundTrips reports whether a float32 point's words must survive a read
// and write: unscaled and finite.
func roundTrips(p Point, w []uint16) bool {
	f := math.Float32frombits(p.join(w))
	return p.plain() && !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0)
}
