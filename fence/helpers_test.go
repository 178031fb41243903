package fence

import (
	"crypto/ed25519"
	"errors"

	"github.com/fencegate/fencegate/fence/internal/seedkey"
)

// failer is the part of testing.TB that the helpers below use; *rapid.T
// has it too.
type failer interface {
	Helper()
	Fatalf(format string, args ...any)
}

// testKey returns the private key of seedkey.Seed(first), whose bytes are
// first, first+1, …, first+31. testKey(0) is the key of the worked example
// in docs/protocol.md and of the fuzz seed corpus. (fence's internal tests
// cannot import fence/fencetest, which imports fence; both share seedkey.)
func testKey(first byte) ed25519.PrivateKey { return seedkey.Key(first) }

func mustSigner(t failer, priv ed25519.PrivateKey) *Signer {
	t.Helper()
	s, err := NewSigner(priv)
	if err != nil {
		t.Fatalf("NewSigner: %v", err)
	}
	return s
}

func mustKeyRing(t failer, cacheSize int, keys ...ed25519.PublicKey) *KeyRing {
	t.Helper()
	r, err := NewKeyRing(cacheSize, keys...)
	if err != nil {
		t.Fatalf("NewKeyRing: %v", err)
	}
	return r
}

// exampleToken is the unsigned token of the worked example in docs/protocol.md.
func exampleToken() Token {
	return Token{
		Domain:   "press-7",
		Epoch:    1767225600000, // 2026-01-01T00:00:00Z in Unix ms
		Seq:      42,
		Holder:   "ctl-a",
		IssuedAt: 1767229200000, // one hour later
		TTLms:    30000,
	}
}

func mustSign(t failer, s *Signer, tok Token) Token {
	t.Helper()
	signed, err := s.Sign(tok)
	if err != nil {
		t.Fatalf("Sign(%v): %v", tok, err)
	}
	return signed
}

// signBody signs arbitrary body bytes the way a Signer would, so tests can
// build malformed but correctly signed tokens.
func signBody(priv ed25519.PrivateKey, body []byte) string {
	return encodeWire(body, ed25519.Sign(priv, signedMessage(body)))
}

// sentinels lists every error the package exports, for checks that an error
// matches exactly one of them.
var sentinels = []error{
	ErrOversize, ErrPrefix, ErrBase64, ErrTruncated, ErrTrailing, ErrVersion,
	ErrInvalidID, ErrInvalidField, ErrUnknownKey, ErrSignature,
	ErrDomainMismatch, ErrKeyFile,
}

// checkOnly fails t unless err wraps want and no other sentinel.
func checkOnly(t failer, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
	for _, other := range sentinels {
		if other != want && errors.Is(err, other) {
			t.Fatalf("error %v wraps %v as well as %v", err, other, want)
		}
	}
}

// checkFields fails t if the decoded fields of got and want differ,
// ignoring Raw.
func checkFields(t failer, got, want Token) {
	t.Helper()
	got.Raw, want.Raw = "", ""
	if got != want {
		t.Fatalf("fields differ:\n got %+v\nwant %+v", got, want)
	}
}
