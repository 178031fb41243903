package fence

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// indexNotWire is the rune scan it replaced, byte for byte: the same index
// for every string, including invalid UTF-8 and multi-byte runes (whose
// first byte is >= 0x80 either way). A difference would let one token have
// two spellings, or refuse a well-formed one.
func TestIndexNotWireIsTheRuneScan(t *testing.T) {
	runeScan := func(s string) int {
		return strings.IndexFunc(s, func(r rune) bool { return r >= 0x80 || !idByte(byte(r)) })
	}
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(
			rapid.StringMatching(`[A-Za-z0-9._-]{0,60}`),
			rapid.String(),
			rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }),
			rapid.Map(rapid.StringMatching(`[A-Za-z0-9._-]{0,30}`), func(s string) string { return s + "\r\n" + s }),
		).Draw(t, "s")
		if got, want := indexNotWire(s), runeScan(s); got != want {
			t.Fatalf("indexNotWire(%q) = %d, rune scan %d", s, got, want)
		}
	})
}

// Every byte value, alone and between wire characters, and every byte
// after a lead byte of a multi-byte rune: the byte scan and the rune scan
// agree.
func TestIndexNotWireEveryByte(t *testing.T) {
	runeScan := func(s string) int {
		return strings.IndexFunc(s, func(r rune) bool { return r >= 0x80 || !idByte(byte(r)) })
	}
	for c := range 256 {
		for _, s := range []string{string([]byte{byte(c)}), "ab" + string([]byte{byte(c)}) + "cd", "\xc3" + string([]byte{byte(c)}), "x.y_" + string([]byte{byte(c)})} {
			if got, want := indexNotWire(s), runeScan(s); got != want {
				t.Errorf("indexNotWire(%q) = %d, rune scan %d", s, got, want)
			}
		}
	}
}
