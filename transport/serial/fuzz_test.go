package serial

import (
	"bytes"
	"testing"
)

// FuzzCOBSDecode: decoding never panics; whatever decodes re-encodes to
// something that decodes to the same bytes and holds no zero; and
// encoding then decoding is the identity.
func FuzzCOBSDecode(f *testing.F) {
	f.Add([]byte{1})
	f.Add([]byte{3, 0x11, 0x22, 2, 0x33})
	f.Add([]byte{5, 1, 2})
	f.Fuzz(func(t *testing.T, in []byte) {
		if enc := COBSEncode(nil, in); bytes.IndexByte(enc, 0) >= 0 {
			t.Fatalf("encoding of % x holds a zero: % x", in, enc)
		} else if dec, err := COBSDecode(enc); err != nil || !bytes.Equal(dec, in) {
			t.Fatalf("round trip of % x = % x, %v", in, dec, err)
		}
		out, err := COBSDecode(in)
		if err != nil {
			return
		}
		again, err := COBSDecode(COBSEncode(nil, out))
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("re-encoding of % x decodes to % x, %v", out, again, err)
		}
	})
}

// FuzzFrameDecoder: any byte stream is survived; every message is either a
// payload with a valid CRC or an error, and a good frame after the noise
// is always found.
func FuzzFrameDecoder(f *testing.F) {
	f.Add([]byte("\xff\xfe garbage"))
	f.Add(EncodeFrame([]byte("x"))[:4])
	f.Fuzz(func(t *testing.T, noise []byte) {
		d := NewFrameDecoder(256)
		var last Msg
		d.Feed(noise, func(Msg) {})
		d.Feed(EncodeFrame([]byte("sentinel")), func(m Msg) { last = m })
		if last.Err != nil || string(last.Data) != "sentinel" {
			t.Fatalf("after noise % x the good frame was not decoded: %+v", noise, last)
		}
	})
}
