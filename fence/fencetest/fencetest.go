// Package fencetest builds fence keys, signers and tokens for tests: the
// same key for the same seed byte in every package, so no test copies the
// Ed25519 seed arithmetic. It is for tests only (its helpers take a
// testing.TB and fail the test), but an ordinary package so that the tests
// of many packages can share it.
//
// fence's own internal tests cannot import it (fencetest imports fence);
// they keep their helpers.
package fencetest

import (
	"crypto/ed25519"
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fence/internal/seedkey"
)

// Seed returns the 32-byte Ed25519 seed whose bytes are first, first+1,
// …, first+31 (wrapping). Seed(0) is the key of the worked example in
// docs/protocol.md.
func Seed(first byte) []byte { return seedkey.Seed(first) }

// Key returns the private key derived from Seed(first).
func Key(first byte) ed25519.PrivateKey { return seedkey.Key(first) }

// MustSigner returns a signer of Key(seed); equal seeds give signers of
// the same key. It fails tb if the signer cannot be built.
func MustSigner(tb testing.TB, seed byte) *fence.Signer {
	tb.Helper()
	s, err := fence.NewSigner(Key(seed))
	if err != nil {
		tb.Fatalf("fencetest: signer of seed %d: %v", seed, err)
	}
	return s
}

// MustToken signs a token of domain at (epoch, seq) for holder with s,
// issued at epoch*1000+seq (Unix ms) with a TTL of 10 s. It fails tb if
// the fields are invalid.
func MustToken(tb testing.TB, s *fence.Signer, domain string, epoch, seq uint64, holder string) fence.Token {
	tb.Helper()
	return MustSign(tb, s, fence.Token{Domain: domain, Epoch: epoch, Seq: seq, Holder: holder,
		IssuedAt: int64(epoch*1000 + seq), TTLms: 10000})
}

// MustSign signs tok with s, for tests that set every field themselves.
// It fails tb if the fields are invalid.
func MustSign(tb testing.TB, s *fence.Signer, tok fence.Token) fence.Token {
	tb.Helper()
	signed, err := s.Sign(tok)
	if err != nil {
		tb.Fatalf("fencetest: sign %+v: %v", tok, err)
	}
	return signed
}

// WritePublicKey writes s's public key to dir/controller.pub, the file an
// agent's trust.keys names, and returns its path. It fails tb on error.
func WritePublicKey(tb testing.TB, dir string, s *fence.Signer) string {
	tb.Helper()
	path := filepath.Join(dir, "controller.pub")
	if err := fence.WritePublicKey(path, s.Public()); err != nil {
		tb.Fatalf("fencetest: %v", err)
	}
	return path
}
