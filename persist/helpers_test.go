package persist

import (
	"context"
	"crypto/ed25519"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// testSigner is a deterministic controller key for tests.
func testSigner(t testing.TB) *fence.Signer {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	s, err := fence.NewSigner(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mustToken signs a token of domain at (epoch, seq) for holder.
func mustToken(t testing.TB, s *fence.Signer, domain string, epoch, seq uint64, holder string) fence.Token {
	t.Helper()
	tok, err := s.Sign(fence.Token{Domain: domain, Epoch: epoch, Seq: seq, Holder: holder,
		IssuedAt: int64(epoch*1000 + seq), TTLms: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// mustOpen opens a store in a fresh temporary directory and closes it at the
// end of the test.
func mustOpen(t testing.TB, opts Options) *Store {
	t.Helper()
	return mustOpenPath(t, filepath.Join(t.TempDir(), "fence.db"), opts)
}

func mustOpenPath(t testing.TB, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustAccept(t testing.TB, s *Store, cmd Command) Decision {
	t.Helper()
	d, err := s.Accept(ctxT(t), cmd)
	if err != nil {
		t.Fatalf("accept %s/%s: %v", cmd.Device, cmd.ID, err)
	}
	return d
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
