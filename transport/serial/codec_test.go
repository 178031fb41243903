package serial

import (
	"bytes"
	"errors"
	"testing"
)

func TestCOBSVectors(t *testing.T) {
	long := bytes.Repeat([]byte{1}, 254)
	tests := []struct {
		name      string
		raw, cobs []byte
	}{
		{"empty", nil, []byte{1}},
		{"one zero", []byte{0}, []byte{1, 1}},
		{"two zeros", []byte{0, 0}, []byte{1, 1, 1}},
		{"zero inside", []byte{0x11, 0x22, 0x00, 0x33}, []byte{3, 0x11, 0x22, 2, 0x33}},
		{"no zero", []byte{0x11, 0x22, 0x33, 0x44}, []byte{5, 0x11, 0x22, 0x33, 0x44}},
		{"trailing zero", []byte{0x11, 0, 0, 0}, []byte{2, 0x11, 1, 1, 1}},
		{"254 non-zero", long, append(append([]byte{0xFF}, long...), 1)},
		{"255 non-zero", append(long, 2), append(append([]byte{0xFF}, long...), 2, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := COBSEncode(nil, tt.raw); !bytes.Equal(got, tt.cobs) {
				t.Errorf("encode = % x, want % x", got, tt.cobs)
			}
			got, err := COBSDecode(tt.cobs)
			if err != nil || !bytes.Equal(got, tt.raw) {
				t.Errorf("decode = % x, %v; want % x", got, err, tt.raw)
			}
		})
	}
}

func TestCOBSDecodeRejects(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{"zero code", []byte{0}},
		{"zero in block", []byte{3, 1, 0}},
		{"block past end", []byte{5, 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := COBSDecode(tt.in); !errors.Is(err, ErrBadFrame) {
				t.Errorf("COBSDecode(% x) = %v, want ErrBadFrame", tt.in, err)
			}
		})
	}
}

// TestFrameVector pins the wire form of a frame so that firmware authors
// can check their encoder against docs/firmware-protocol.md.
func TestFrameVector(t *testing.T) {
	payload := []byte{0x01, 0x00, 0x02}
	want := []byte{0x00, 0x02, 0x01, 0x06, 0x02, 0x24, 0x1E, 0x41, 0xF3, 0x00}
	got := EncodeFrame(payload)
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodeFrame = % x, want % x (crc %08x)", got, want, CRC32C(payload))
	}
	if CRC32C([]byte("123456789")) != 0xE3069283 {
		t.Fatalf("CRC32C check value = %08x, want e3069283", CRC32C([]byte("123456789")))
	}
}

func TestFrameDecoder(t *testing.T) {
	good := EncodeFrame([]byte("hello"))
	corrupt := bytes.Clone(good)
	corrupt[3] ^= 0x40
	half := good[:5]
	tests := []struct {
		name string
		in   []byte
		want []string // payloads, "!" for an error
	}{
		{"one frame", good, []string{"hello"}},
		{"split over feeds", good, []string{"hello"}},
		{"noise then frame", append([]byte("\xff\xfe\x13garbage"), good...), []string{"!", "hello"}},
		{"half frame then frame", append(bytes.Clone(half), good...), []string{"!", "hello"}},
		{"corrupt then frame", append(bytes.Clone(corrupt), good...), []string{"!", "hello"}},
		{"empty frames skipped", []byte{0, 0, 0}, nil},
		{"overlong", append(append([]byte{0}, bytes.Repeat([]byte{7}, 100)...), append([]byte{0}, good...)...), []string{"!", "hello"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewFrameDecoder(64)
			var got []string
			emit := func(m Msg) {
				if m.Err != nil {
					if !errors.Is(m.Err, ErrBadFrame) {
						t.Errorf("error %v does not wrap ErrBadFrame", m.Err)
					}
					got = append(got, "!")
					return
				}
				got = append(got, string(m.Data))
			}
			if tt.name == "split over feeds" {
				for _, b := range tt.in {
					d.Feed([]byte{b}, emit)
				}
			} else {
				d.Feed(tt.in, emit)
			}
			if !equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLineDecoder(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"lf", "OK 1\n", []string{"OK 1"}},
		{"crlf", "OK 1\r\nERR x\r\n", []string{"OK 1", "ERR x"}},
		{"partial kept", "OK", nil},
		{"empty lines skipped", "\n\r\n", nil},
		{"control byte", "\x01\x02junk\nOK\n", []string{"!", "OK"}},
		{"overlong", "0123456789ABCDEFGHIJ\nOK\n", []string{"!", "OK"}},
		{"tab allowed", "A\tB\n", []string{"A\tB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewLineDecoder(16)
			var got []string
			d.Feed([]byte(tt.in), func(m Msg) {
				if m.Err != nil {
					if !errors.Is(m.Err, ErrGarbage) {
						t.Errorf("error %v does not wrap ErrGarbage", m.Err)
					}
					got = append(got, "!")
					return
				}
				got = append(got, string(m.Data))
			})
			if !equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLineDecoderReset(t *testing.T) {
	d := NewLineDecoder(16)
	var got []string
	emit := func(m Msg) { got = append(got, string(m.Data)) }
	d.Feed([]byte("half"), emit)
	d.Reset()
	d.Feed([]byte("OK\n"), emit)
	if !equal(got, []string{"OK"}) {
		t.Fatalf("after Reset got %q, want [OK]", got)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCutGuard: for frames whose COBS data ends in each possible way
// (a short block, an empty block, a full block then the empty one), no
// proper prefix of the frame, the guard and a following frame decode to
// the first frame's payload.
func TestCutGuard(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
	}{
		{"short", []byte("hello")},
		{"zero at the end", []byte{'a', 0}},
		{"ends in 01 02", []byte{0x01, 0x02}},
		{"full block at the end", fullBlockPayload(t)},
	}
	next := EncodeFrame([]byte("next"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := EncodeFrame(tt.payload)
			for k := 1; k < len(f); k++ {
				in := append(append(bytes.Clone(f[:k]), CutGuard(f)), next...)
				NewFrameDecoder(4096).Feed(in, func(m Msg) {
					if m.Err == nil && bytes.Equal(m.Data, tt.payload) {
						t.Errorf("a cut after %d of %d bytes was completed by the guard %#02x", k, len(f), CutGuard(f))
					}
				})
			}
		})
	}
}

// fullBlockPayload finds a payload whose frame's COBS data ends in a full
// block of 254 bytes followed by the empty block 0x01.
func fullBlockPayload(t *testing.T) []byte {
	for n := 250; n < 254; n++ {
		for seed := byte(1); seed < 255; seed++ {
			p := bytes.Repeat([]byte{seed}, n)
			f := EncodeFrame(p)
			if len(f) == 1+1+254+1+1 && f[1] == 0xFF && f[len(f)-2] == 0x01 {
				return p
			}
		}
	}
	t.Skip("no payload ending in a full COBS block found")
	return nil
}
