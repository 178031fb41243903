package fence

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzParse from fuzzSeeds")

const corpusDir = "testdata/fuzz/FuzzParse"

type fuzzSeed struct {
	name string // file name in corpusDir
	wire string
	want error // Verify's outcome under the testKey(0) ring; nil: verifies
}

// fuzzSeeds returns interesting inputs for FuzzParse, deterministic so the
// committed corpus can be checked against them. Valid ones are signed by
// testKey(0).
func fuzzSeeds(t failer) []fuzzSeed {
	priv := testKey(0)
	signer := mustSigner(t, priv)
	example := mustSign(t, signer, exampleToken())
	longest := mustSign(t, signer, Token{
		Domain: strings.Repeat("D", MaxIDLen), Epoch: math.MaxUint64, Seq: math.MaxUint64,
		Holder: strings.Repeat("h", MaxIDLen), IssuedAt: math.MinInt64, TTLms: math.MaxUint32,
	})
	base := exampleToken()
	base.KeyID = signer.KeyID()
	body := encodeBody(base)
	withBody := func(f func([]byte) []byte) string { return signBody(priv, f(bytes.Clone(body))) }
	withToken := func(f func(*Token)) string {
		tok := base
		f(&tok)
		return signBody(priv, encodeBody(tok))
	}
	other := testKey(0x40)
	foreign := base
	foreign.KeyID = KeyIDOf(other.Public().(ed25519.PublicKey))
	next := base
	next.Seq++

	return []fuzzSeed{
		{name: "valid-example", wire: example.Raw},
		{name: "valid-longest", wire: longest.Raw},
		{name: "empty", wire: "", want: ErrPrefix},
		{name: "prefix-only", wire: WirePrefix, want: ErrPrefix},
		{name: "separators-only", wire: WirePrefix + ".", want: ErrTruncated},
		{name: "wrong-prefix", wire: "fg2." + strings.TrimPrefix(example.Raw, WirePrefix), want: ErrPrefix},
		{name: "short-signature", wire: encodeWire(body, ed25519.Sign(priv, signedMessage(body))[:SignatureLen-1]), want: ErrTruncated},
		{name: "cut-in-signature", wire: example.Raw[:len(example.Raw)-3], want: ErrBase64},
		{name: "trailing-newline", wire: example.Raw + "\n", want: ErrBase64},
		{name: "padded", wire: example.Raw + "==", want: ErrBase64},
		{name: "oversize", wire: WirePrefix + strings.Repeat("A", MaxTokenLen-len(WirePrefix)+1), want: ErrOversize},
		{name: "truncated-body", wire: withBody(func(b []byte) []byte { return b[:fixedHead+4] }), want: ErrTruncated},
		{name: "trailing-body-byte", wire: withBody(func(b []byte) []byte { return append(b, 0) }), want: ErrTrailing},
		{name: "version-2", wire: withBody(func(b []byte) []byte { b[0] = 2; return b }), want: ErrVersion},
		{name: "domain-with-space", wire: withToken(func(tok *Token) { tok.Domain = "press 7" }), want: ErrInvalidID},
		{name: "epoch-0", wire: withToken(func(tok *Token) { tok.Epoch = 0 }), want: ErrInvalidField},
		{name: "unknown-key", wire: signBody(other, encodeBody(foreign)), want: ErrUnknownKey},
		{name: "swapped-signature", wire: encodeWire(encodeBody(next), ed25519.Sign(priv, signedMessage(body))), want: ErrSignature},
	}
}

// FuzzParse feeds arbitrary strings to ParseUnverified and KeyRing.Verify.
// Neither may panic; whatever either accepts must be canonical (re-encoding
// gives the input back) and valid; Verify accepts only what ParseUnverified
// accepts, and only tokens the test key signed.
func FuzzParse(f *testing.F) {
	signer := mustSigner(f, testKey(0))
	ring := mustKeyRing(f, 16, signer.Public())
	for _, s := range fuzzSeeds(f) {
		f.Add(s.wire)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parsed, perr := ParseUnverified(s)
		tok, err := ring.Verify(s)
		if perr == nil {
			_, sig, serr := splitWire(s)
			switch {
			case serr != nil:
				t.Fatalf("ParseUnverified accepted %q, splitWire says %v", s, serr)
			case parsed.Raw != s:
				t.Fatalf("ParseUnverified(%q).Raw = %q", s, parsed.Raw)
			case parsed.Validate() != nil:
				t.Fatalf("ParseUnverified accepted an invalid token: %v", parsed.Validate())
			case encodeWire(encodeBody(parsed), sig) != s:
				t.Fatalf("%q is not canonical: re-encodes as %q", s, encodeWire(encodeBody(parsed), sig))
			case len(s) > MaxTokenLen:
				t.Fatalf("ParseUnverified accepted %d bytes", len(s))
			}
		}
		if err != nil {
			if tok != (Token{}) {
				t.Fatalf("Verify returned %+v with error %v", tok, err)
			}
			return
		}
		if perr != nil {
			t.Fatalf("Verify accepted %q, ParseUnverified says %v", s, perr)
		}
		if tok != parsed || tok.Raw != s || tok.KeyID != signer.KeyID() {
			t.Fatalf("Verify = %+v, ParseUnverified = %+v, input %q", tok, parsed, s)
		}
		// Ed25519 is deterministic: re-signing the fields reproduces the input.
		if again := mustSign(t, signer, tok); again.Raw != s {
			t.Fatalf("re-signed %+v as %q, want %q", tok, again.Raw, s)
		}
	})
}

// TestFuzzSeedCorpus checks that the committed seed corpus holds fuzzSeeds and
// that each seed still has the outcome it was chosen for. Run with
// -update-corpus to rewrite the files.
func TestFuzzSeedCorpus(t *testing.T) {
	ring := mustKeyRing(t, 0, testKey(0).Public().(ed25519.PublicKey))
	for _, seed := range fuzzSeeds(t) {
		t.Run(seed.name, func(t *testing.T) {
			path := filepath.Join(corpusDir, seed.name)
			if *updateCorpus {
				data := fmt.Sprintf("go test fuzz v1\nstring(%q)\n", seed.wire)
				if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := readCorpusString(path)
			if err != nil {
				t.Fatalf("%v (run with -update-corpus to rewrite the corpus)", err)
			}
			if got != seed.wire {
				t.Fatalf("%s holds %q, fuzzSeeds has %q", path, got, seed.wire)
			}
			_, err = ring.Verify(got)
			if seed.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v, want success", err)
				}
				return
			}
			checkOnly(t, err, seed.want)
		})
	}
}

// readCorpusString reads a "go test fuzz v1" file holding one string.
func readCorpusString(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" ||
		!strings.HasPrefix(lines[1], "string(") || !strings.HasSuffix(lines[1], ")") {
		return "", errors.New(path + ": not a one-string go test fuzz v1 file")
	}
	return strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")"))
}
