package fence

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// a18Tokens are the signed tokens the edit attacks start from: a small one
// and one of the largest shape (128-byte domain and holder, extreme numbers).
func a18Tokens(t *testing.T) (*KeyRing, []Token) {
	s := mustSigner(t, testKey(0))
	ring := mustKeyRing(t, 0, s.Public())
	small := mustSign(t, s, exampleToken())
	big := mustSign(t, s, Token{Domain: strings.Repeat("d.-_9Z", 22)[:128], Holder: strings.Repeat("h_-.0z", 22)[:128],
		Epoch: ^uint64(0), Seq: ^uint64(0), IssuedAt: -1 << 63, TTLms: ^uint32(0)})
	return ring, []Token{small, big}
}

// a18CheckEdit checks one edited wire form e of genuine token g: a form
// that parses is the one canonical spelling of its body and signature (so
// no token has two spellings the fence or a cache could tell apart), its
// Raw is e exactly, Verify agrees with ParseUnverified on every field, and
// only the genuine spelling itself verifies. A form with a byte outside
// the wire alphabet after the prefix is refused as base64, naming that byte.
func a18CheckEdit(t *testing.T, ring *KeyRing, g Token, e string) {
	t.Helper()
	p, perr := ParseUnverified(e)
	v, verr := ring.Verify(e)
	if perr == nil {
		body, sig, err := splitWire(e)
		if err != nil {
			t.Fatalf("%q parses but splitWire refuses it: %v", e, err)
		}
		if again := encodeWire(body, sig); again != e {
			t.Fatalf("%q parses but its canonical spelling is %q: one token, two spellings", e, again)
		}
		if !bytes.Equal(encodeBody(p), body) {
			t.Fatalf("%q parses to %+v whose body re-encodes differently", e, p)
		}
		if p.Raw != e {
			t.Fatalf("ParseUnverified(%q).Raw = %q", e, p.Raw)
		}
	}
	if verr == nil {
		if e != g.Raw {
			t.Fatalf("edited form %q of %q verifies as %+v", e, g.Raw, v)
		}
		if perr != nil || p != v {
			t.Fatalf("%q: Verify gives %+v, ParseUnverified %+v, %v", e, v, p, perr)
		}
	}
	if rest, ok := strings.CutPrefix(e, WirePrefix); ok && len(e) <= MaxTokenLen {
		first := -1
		for i := 0; i < len(rest); i++ {
			if !idByte(rest[i]) {
				first = i
				break
			}
		}
		if first >= 0 {
			want := fmt.Sprintf("byte 0x%02x at %d", rest[first], len(WirePrefix)+first)
			for _, err := range []error{perr, verr} {
				if !errors.Is(err, ErrBase64) || !strings.Contains(err.Error(), want) {
					t.Fatalf("%q (bad byte at %d): error %v, want ErrBase64 naming %q", e, len(WirePrefix)+first, err, want)
				}
			}
		}
	}
}

// Every single-byte substitution, insertion and deletion of a signed
// token, with every byte value: the byte-table scan, the strict base64 and
// the body layout leave exactly one spelling of a token, and only the
// genuine one verifies.
func TestAttack18WireEveryByteEdit(t *testing.T) {
	ring, toks := a18Tokens(t)
	for _, g := range toks {
		a18CheckEdit(t, ring, g, g.Raw)
		if _, err := ring.Verify(g.Raw); err != nil {
			t.Fatalf("genuine token refused: %v", err)
		}
		raw := []byte(g.Raw)
		for i := 0; i <= len(raw); i++ {
			if i < len(raw) {
				a18CheckEdit(t, ring, g, string(raw[:i])+string(raw[i+1:])) // deletion
			}
			for c := range 256 {
				ins := string(raw[:i]) + string([]byte{byte(c)}) + string(raw[i:])
				a18CheckEdit(t, ring, g, ins)
				if i < len(raw) && raw[i] != byte(c) {
					sub := append([]byte(nil), raw...)
					sub[i] = byte(c)
					a18CheckEdit(t, ring, g, string(sub))
				}
			}
		}
	}
}

// Multi-byte characters a rune-based or normalising reader could take for
// wire characters — overlong encodings of 'A' and '.', fullwidth letters,
// a dotted capital I (which lower-cases to ASCII 'i' + combining), U+2028,
// surrogates, NUL, CR LF, padding and the std-base64 characters — are
// refused wherever they are put, and never verify.
func TestAttack18WireLookalikes(t *testing.T) {
	ring, toks := a18Tokens(t)
	odd := []string{"\xc1\x81", "\xc0\xae", "\xe0\x80\xae", "\xef\xbc\xa1", "\u0130", "\u212a", "\u2028", "\u2029",
		"\xed\xa0\x80", "\x00", "\r\n", "\n", "\r", " ", "=", "==", "+", "/", "\t", "\u00a0", "\ufeff", "\xff", "\x80"}
	for _, g := range toks {
		for _, o := range odd {
			for i := len(WirePrefix); i <= len(g.Raw); i++ {
				ins := g.Raw[:i] + o + g.Raw[i:]
				a18CheckEdit(t, ring, g, ins)
				if _, err := ParseUnverified(ins); !errors.Is(err, ErrBase64) {
					t.Fatalf("%q inserted at %d: ParseUnverified error %v, want ErrBase64", o, i, err)
				}
				if i < len(g.Raw) {
					sub := g.Raw[:i] + o + g.Raw[i+1:]
					if _, err := ring.Verify(sub); !errors.Is(err, ErrBase64) {
						t.Fatalf("%q for byte %d: Verify error %v, want ErrBase64", o, i, err)
					}
				}
			}
		}
	}
}
