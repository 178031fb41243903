package fence

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// idAlphabet is every byte allowed in an id, in a fixed order.
const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"

// b64Alphabet is the unpadded base64url alphabet.
const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func TestSignVerifyRoundTrip(t *testing.T) {
	longID := strings.Repeat(idAlphabet, 2)[:MaxIDLen]
	tests := []struct {
		name string
		tok  Token
	}{
		{name: "protocol example", tok: exampleToken()},
		{name: "shortest ids and smallest fields", tok: Token{Domain: "d", Epoch: 1, Seq: 1, Holder: "h", TTLms: 1}},
		{name: "longest ids", tok: Token{Domain: longID, Epoch: 7, Seq: 9, Holder: longID, IssuedAt: 1, TTLms: 5000}},
		{name: "largest integers", tok: Token{Domain: "a.b_c-D9", Epoch: math.MaxUint64, Seq: math.MaxUint64, Holder: "x",
			IssuedAt: math.MaxInt64, TTLms: math.MaxUint32}},
		{name: "negative issued_at", tok: Token{Domain: "dom", Epoch: 1 << 63, Seq: 1 << 32, Holder: "h", IssuedAt: math.MinInt64, TTLms: 1}},
		{name: "caller's KeyID and Raw are replaced", tok: Token{Domain: "dom", Epoch: 3, Seq: 4, Holder: "h", TTLms: 10,
			KeyID: KeyID{1, 2, 3, 4, 5, 6, 7, 8}, Raw: "fg1.stale"}},
	}
	signer := mustSigner(t, testKey(0))
	ring := mustKeyRing(t, 0, signer.Public())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			signed := mustSign(t, signer, tc.tok)
			want := tc.tok
			want.KeyID = signer.KeyID()
			checkFields(t, signed, want)
			if !strings.HasPrefix(signed.Raw, WirePrefix) || len(signed.Raw) > MaxTokenLen {
				t.Fatalf("Raw %q: want prefix %q and at most %d bytes", signed.Raw, WirePrefix, MaxTokenLen)
			}
			if i := strings.IndexFunc(signed.Raw, func(r rune) bool { return !strings.ContainsRune(idAlphabet, r) }); i >= 0 {
				t.Fatalf("Raw has byte %q at %d outside [A-Za-z0-9._-]", signed.Raw[i], i)
			}

			got, err := ring.Verify(signed.Raw)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got != signed {
				t.Fatalf("Verify = %+v, want %+v", got, signed)
			}
			// A second Verify is answered from the cache and must agree.
			if again, err := ring.Verify(signed.Raw); err != nil || again != signed {
				t.Fatalf("cached Verify = %+v, %v; want %+v", again, err, signed)
			}

			parsed, err := ParseUnverified(signed.Raw)
			if err != nil {
				t.Fatalf("ParseUnverified: %v", err)
			}
			if parsed != signed {
				t.Fatalf("ParseUnverified = %+v, want %+v", parsed, signed)
			}
		})
	}
}

func TestSignRejectsInvalidToken(t *testing.T) {
	valid := exampleToken()
	tests := []struct {
		name   string
		mutate func(*Token)
		want   error
	}{
		{name: "zero token", mutate: func(tok *Token) { *tok = Token{} }, want: ErrInvalidID},
		{name: "domain with space", mutate: func(tok *Token) { tok.Domain = "press 7" }, want: ErrInvalidID},
		{name: "domain of 129 bytes", mutate: func(tok *Token) { tok.Domain = strings.Repeat("d", MaxIDLen+1) }, want: ErrInvalidID},
		{name: "holder of 300 bytes", mutate: func(tok *Token) { tok.Holder = strings.Repeat("h", 300) }, want: ErrInvalidID},
		{name: "empty holder", mutate: func(tok *Token) { tok.Holder = "" }, want: ErrInvalidID},
		{name: "epoch 0", mutate: func(tok *Token) { tok.Epoch = 0 }, want: ErrInvalidField},
		{name: "seq 0", mutate: func(tok *Token) { tok.Seq = 0 }, want: ErrInvalidField},
		{name: "ttl 0", mutate: func(tok *Token) { tok.TTLms = 0 }, want: ErrInvalidField},
	}
	signer := mustSigner(t, testKey(0))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := valid
			tc.mutate(&tok)
			got, err := signer.Sign(tok)
			checkOnly(t, err, tc.want)
			if got != (Token{}) {
				t.Fatalf("Sign returned %+v with its error, want the zero Token", got)
			}
		})
	}
}

// TestSingleByteChangesRejected replaces every byte of a signed token's wire
// form with many other values; no variant may verify, even after the original
// has been verified and cached.
func TestSingleByteChangesRejected(t *testing.T) {
	signer := mustSigner(t, testKey(0))
	ring := mustKeyRing(t, 0, signer.Public())
	good := mustSign(t, signer, exampleToken()).Raw
	if _, err := ring.Verify(good); err != nil {
		t.Fatalf("Verify(good): %v", err)
	}

	replacements := []byte(b64Alphabet + ".=\n\r\x00\xff+/ ")
	tried := 0
	for i := range len(good) {
		for _, r := range replacements {
			if good[i] == r {
				continue
			}
			bad := []byte(good)
			bad[i] = r
			tok, err := ring.Verify(string(bad))
			if err == nil {
				t.Fatalf("byte %d replaced by %q: Verify accepted %q as %+v", i, r, bad, tok)
			}
			if tok != (Token{}) {
				t.Fatalf("byte %d replaced by %q: Verify returned %+v with error %v", i, r, tok, err)
			}
			tried++
		}
	}
	if want := len(good) * (len(replacements) - 1); tried < want-len(good) {
		t.Fatalf("tried %d variants, want about %d", tried, want)
	}
	if n := ring.cache.len(); n != 1 {
		t.Fatalf("cache holds %d tokens after rejected variants, want only the good one", n)
	}
	if _, err := ring.Verify(good); err != nil {
		t.Fatalf("Verify(good) after variants: %v", err)
	}
}

// TestTruncationsAndExtensionsRejected cuts the wire form at every length and
// appends every alphabet byte to it.
func TestTruncationsAndExtensionsRejected(t *testing.T) {
	signer := mustSigner(t, testKey(0))
	ring := mustKeyRing(t, 0, signer.Public())
	good := mustSign(t, signer, exampleToken()).Raw
	if _, err := ring.Verify(good); err != nil {
		t.Fatalf("Verify(good): %v", err)
	}
	for n := range len(good) {
		if _, err := ring.Verify(good[:n]); err == nil {
			t.Fatalf("Verify accepted the first %d of %d bytes", n, len(good))
		}
	}
	for _, c := range []byte(idAlphabet + "=\n") {
		if _, err := ring.Verify(good + string(c)); err == nil {
			t.Fatalf("Verify accepted the token with %q appended", c)
		}
	}
}

// flipLastBit returns the unpadded base64url string s with the lowest bit of
// its last character's value flipped. When the encoded length is not a
// multiple of 3 that bit is padding, which strict decoding must reject.
func flipLastBit(s string) string {
	last := strings.IndexByte(b64Alphabet, s[len(s)-1])
	return s[:len(s)-1] + string(b64Alphabet[last^1])
}

func TestDecodeErrors(t *testing.T) {
	priv := testKey(0)
	signer := mustSigner(t, priv)
	ring := mustKeyRing(t, 0, signer.Public())
	other := testKey(0x40)

	base := exampleToken()
	base.KeyID = signer.KeyID()
	body := encodeBody(base) // 51 bytes: 37 fixed, 1+7 domain, 1+5 holder
	good := signBody(priv, body)
	goodBody, goodSig, _ := strings.Cut(strings.TrimPrefix(good, WirePrefix), ".")

	// withBody signs a modified copy of the good body with the ring's key.
	withBody := func(f func(b []byte) []byte) string { return signBody(priv, f(bytes.Clone(body))) }
	// withToken signs the body of a modified token, skipping validation.
	withToken := func(f func(*Token)) string {
		tok := base
		f(&tok)
		return signBody(priv, encodeBody(tok))
	}
	withSig := func(sig []byte) string { return encodeWire(body, sig) }
	realSig := ed25519.Sign(priv, signedMessage(body))
	ktID := KeyIDOf(other.Public().(ed25519.PublicKey))

	tests := []struct {
		name string
		wire string
		want error // nil: must verify
		// unverifiedOK: ParseUnverified succeeds (the fault is in the key or
		// signature); otherwise it must fail with want as well.
		unverifiedOK bool
	}{
		{name: "control: hand-built body", wire: good},
		{name: "control: body rebuilt field by field", wire: withBody(func([]byte) []byte {
			b := []byte{BodyVersion}
			id := signer.KeyID()
			b = append(b, id[:]...)
			b = binary.BigEndian.AppendUint64(b, base.Epoch)
			b = binary.BigEndian.AppendUint64(b, base.Seq)
			b = binary.BigEndian.AppendUint64(b, uint64(base.IssuedAt))
			b = binary.BigEndian.AppendUint32(b, base.TTLms)
			b = append(b, 7)
			b = append(b, "press-7"...)
			b = append(b, 5)
			return append(b, "ctl-a"...)
		})},

		{name: "1025 bytes", wire: WirePrefix + strings.Repeat("A", MaxTokenLen+1-len(WirePrefix)), want: ErrOversize},
		{name: "valid token padded past 1 KiB", wire: good + strings.Repeat("A", MaxTokenLen), want: ErrOversize},
		{name: "signed body over 1 KiB", wire: withBody(func(b []byte) []byte { return append(b, make([]byte, 720)...) }), want: ErrOversize},
		{name: "1024 bytes is not oversize", wire: WirePrefix + strings.Repeat("A", MaxTokenLen-len(WirePrefix)), want: ErrPrefix},

		{name: "empty", wire: "", want: ErrPrefix},
		{name: "prefix only without dot", wire: "fg1", want: ErrPrefix},
		{name: "version 2 prefix", wire: "fg2." + goodBody + "." + goodSig, want: ErrPrefix},
		{name: "upper-case prefix", wire: "FG1." + goodBody + "." + goodSig, want: ErrPrefix},
		{name: "leading space", wire: " " + good, want: ErrPrefix},
		{name: "no signature part", wire: WirePrefix + goodBody, want: ErrPrefix},

		{name: "padded body", wire: WirePrefix + goodBody + "==." + goodSig, want: ErrBase64},
		{name: "padded signature", wire: good + "==", want: ErrBase64},
		{name: "newline in body", wire: WirePrefix + goodBody[:10] + "\n" + goodBody[10:] + "." + goodSig, want: ErrBase64},
		{name: "CRLF at end", wire: good + "\r\n", want: ErrBase64},
		{name: "standard alphabet in signature", wire: strings.ReplaceAll(good, "_", "/"), want: ErrBase64},
		{name: "non-ASCII byte", wire: WirePrefix + "é" + goodBody + "." + goodSig, want: ErrBase64},
		{name: "body length 1 mod 4", wire: WirePrefix + goodBody + "A." + goodSig, want: ErrBase64},
		{name: "second dot", wire: good + ".AAAA", want: ErrBase64},
		{name: "non-zero padding bits in signature", wire: WirePrefix + goodBody + "." + flipLastBit(goodSig), want: ErrBase64},
		{name: "non-zero padding bits in body", wire: func() string {
			long := withToken(func(tok *Token) { tok.Holder = "ctl-ab" }) // 52-byte body
			b, s, _ := strings.Cut(strings.TrimPrefix(long, WirePrefix), ".")
			return WirePrefix + flipLastBit(b) + "." + s
		}(), want: ErrBase64},

		{name: "empty body", wire: WirePrefix + "." + goodSig, want: ErrTruncated},
		{name: "version byte only", wire: withBody(func(b []byte) []byte { return b[:1] }), want: ErrTruncated},
		{name: "header one byte short", wire: withBody(func(b []byte) []byte { return b[:fixedHead-1] }), want: ErrTruncated},
		{name: "no domain length", wire: withBody(func(b []byte) []byte { return b[:fixedHead] }), want: ErrTruncated},
		{name: "domain cut short", wire: withBody(func(b []byte) []byte { return b[:fixedHead+3] }), want: ErrTruncated},
		{name: "no holder length", wire: withBody(func(b []byte) []byte { return b[:fixedHead+1+7] }), want: ErrTruncated},
		{name: "holder one byte short", wire: withBody(func(b []byte) []byte { return b[:len(b)-1] }), want: ErrTruncated},
		{name: "holder length 255", wire: withBody(func(b []byte) []byte { b[fixedHead+1+7] = 255; return b }), want: ErrTruncated},
		{name: "signature 63 bytes", wire: withSig(realSig[:63]), want: ErrTruncated},
		{name: "signature empty", wire: good[:len(good)-len(goodSig)], want: ErrTruncated},

		{name: "one zero byte after holder", wire: withBody(func(b []byte) []byte { return append(b, 0) }), want: ErrTrailing},
		{name: "a third string", wire: withBody(func(b []byte) []byte { return append(b, 1, 'x') }), want: ErrTrailing},
		{name: "holder length too small", wire: withBody(func(b []byte) []byte { b[fixedHead+1+7] = 4; return b }), want: ErrTrailing},
		{name: "signature 65 bytes", wire: withSig(append(bytes.Clone(realSig), 0)), want: ErrTrailing},

		{name: "version 0", wire: withBody(func(b []byte) []byte { b[0] = 0; return b }), want: ErrVersion},
		{name: "version 2", wire: withBody(func(b []byte) []byte { b[0] = 2; return b }), want: ErrVersion},
		{name: "version 0xff", wire: withBody(func(b []byte) []byte { b[0] = 0xff; return b }), want: ErrVersion},
		{name: "version 2 and truncated", wire: withBody(func([]byte) []byte { return []byte{2} }), want: ErrVersion},

		{name: "signed by an untrusted key", wire: signBody(other, encodeBody(func() Token { tok := base; tok.KeyID = ktID; return tok }())),
			want: ErrUnknownKey, unverifiedOK: true},
		{name: "key id changed", wire: withBody(func(b []byte) []byte { b[1] ^= 0x80; return b }), want: ErrUnknownKey, unverifiedOK: true},

		{name: "trusted key id, signed by another key", wire: signBody(other, body), want: ErrSignature, unverifiedOK: true},
		{name: "signed without the domain-separation prefix", wire: withSig(ed25519.Sign(priv, body)), want: ErrSignature, unverifiedOK: true},
		{name: "zero signature", wire: withSig(make([]byte, SignatureLen)), want: ErrSignature, unverifiedOK: true},
		{name: "signature of another token", wire: encodeWire(encodeBody(func() Token { tok := base; tok.Seq++; return tok }()), realSig),
			want: ErrSignature, unverifiedOK: true},
		{name: "signature of the prefix alone", wire: withSig(ed25519.Sign(priv, []byte(SignaturePrefix))), want: ErrSignature, unverifiedOK: true},

		{name: "domain with a space", wire: withToken(func(tok *Token) { tok.Domain = "press 7" }), want: ErrInvalidID},
		{name: "domain of 129 bytes", wire: withToken(func(tok *Token) { tok.Domain = strings.Repeat("d", MaxIDLen+1) }), want: ErrInvalidID},
		{name: "empty domain", wire: withToken(func(tok *Token) { tok.Domain = "" }), want: ErrInvalidID},
		{name: "domain with NUL", wire: withToken(func(tok *Token) { tok.Domain = "press\x007" }), want: ErrInvalidID},
		{name: "holder with slash", wire: withToken(func(tok *Token) { tok.Holder = "ctl/a" }), want: ErrInvalidID},
		{name: "holder with byte 0xff", wire: withToken(func(tok *Token) { tok.Holder = "ctl\xffa" }), want: ErrInvalidID},
		{name: "empty holder", wire: withToken(func(tok *Token) { tok.Holder = "" }), want: ErrInvalidID},
		{name: "holder of 255 bytes", wire: withToken(func(tok *Token) { tok.Holder = strings.Repeat("h", 255) }), want: ErrInvalidID},

		{name: "epoch 0", wire: withToken(func(tok *Token) { tok.Epoch = 0 }), want: ErrInvalidField},
		{name: "seq 0", wire: withToken(func(tok *Token) { tok.Seq = 0 }), want: ErrInvalidField},
		{name: "ttl 0", wire: withToken(func(tok *Token) { tok.TTLms = 0 }), want: ErrInvalidField},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := ring.Verify(tc.wire)
			parsed, perr := ParseUnverified(tc.wire)
			if tc.want == nil {
				if err != nil || perr != nil {
					t.Fatalf("Verify: %v; ParseUnverified: %v; want both to succeed", err, perr)
				}
				checkFields(t, tok, base)
				checkFields(t, parsed, base)
				return
			}
			checkOnly(t, err, tc.want)
			if tok != (Token{}) {
				t.Fatalf("Verify returned %+v with its error", tok)
			}
			if tc.unverifiedOK {
				if perr != nil {
					t.Fatalf("ParseUnverified: %v, want success (only the key or signature is wrong)", perr)
				}
				return
			}
			checkOnly(t, perr, tc.want)
			if parsed != (Token{}) {
				t.Fatalf("ParseUnverified returned %+v with its error", parsed)
			}
		})
	}
	if n := ring.cache.len(); n != 1 {
		t.Fatalf("cache holds %d tokens, want 1 (only the control token)", n)
	}
}

func TestEncodeBodyLayout(t *testing.T) {
	tok := exampleToken()
	tok.KeyID = KeyID{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7}
	b := encodeBody(tok)
	fields := []struct {
		name   string
		off, n int
		want   []byte
	}{
		{name: "version", off: 0, n: 1, want: []byte{0x01}},
		{name: "key id", off: 1, n: 8, want: tok.KeyID[:]},
		{name: "epoch", off: 9, n: 8, want: binary.BigEndian.AppendUint64(nil, tok.Epoch)},
		{name: "seq", off: 17, n: 8, want: binary.BigEndian.AppendUint64(nil, tok.Seq)},
		{name: "issued_at", off: 25, n: 8, want: binary.BigEndian.AppendUint64(nil, uint64(tok.IssuedAt))},
		{name: "ttl_ms", off: 33, n: 4, want: binary.BigEndian.AppendUint32(nil, tok.TTLms)},
		{name: "domain length", off: 37, n: 1, want: []byte{7}},
		{name: "domain", off: 38, n: 7, want: []byte("press-7")},
		{name: "holder length", off: 45, n: 1, want: []byte{5}},
		{name: "holder", off: 46, n: 5, want: []byte("ctl-a")},
	}
	if len(b) != 51 || fixedHead != 37 {
		t.Fatalf("body is %d bytes with a %d-byte header, want 51 and 37", len(b), fixedHead)
	}
	for _, f := range fields {
		t.Run(f.name, func(t *testing.T) {
			if got := b[f.off : f.off+f.n]; !bytes.Equal(got, f.want) {
				t.Fatalf("bytes %d..%d = % x, want % x", f.off, f.off+f.n-1, got, f.want)
			}
		})
	}
	if got := string(signedMessage(b)); got != "fencegate token v1\x00"+string(b) {
		t.Fatalf("signed message = %q", got)
	}
}

func TestParseUnverifiedIgnoresSignature(t *testing.T) {
	signer := mustSigner(t, testKey(0))
	good := mustSign(t, signer, exampleToken())
	body, _, err := splitWire(good.Raw)
	if err != nil {
		t.Fatalf("splitWire: %v", err)
	}
	forged := encodeWire(body, make([]byte, SignatureLen))
	tok, err := ParseUnverified(forged)
	if err != nil {
		t.Fatalf("ParseUnverified: %v", err)
	}
	checkFields(t, tok, good)
	if tok.Raw != forged {
		t.Fatalf("Raw = %q, want the input %q", tok.Raw, forged)
	}
	if _, err := mustKeyRing(t, 0, signer.Public()).Verify(forged); !errors.Is(err, ErrSignature) {
		t.Fatalf("Verify(forged) = %v, want ErrSignature", err)
	}
}
