package fencetest_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fence/fencetest"
)

// TestMustSigner: one seed byte gives one key in every call; different
// seeds give different keys.
func TestMustSigner(t *testing.T) {
	a, b := fencetest.MustSigner(t, 1), fencetest.MustSigner(t, 1)
	if !bytes.Equal(a.Public(), b.Public()) {
		t.Fatal("MustSigner(1) gave two different keys")
	}
	if bytes.Equal(a.Public(), fencetest.MustSigner(t, 2).Public()) {
		t.Fatal("MustSigner(1) and MustSigner(2) gave the same key")
	}
	if got := fencetest.Seed(250); got[0] != 250 || got[31] != 25 {
		t.Fatalf("Seed(250) = %v, want 250, 251, … wrapping to 25", got)
	}
}

// TestMustToken: a token MustToken signs verifies against the signer's key
// with the fields asked for, and not against another seed's key.
func TestMustToken(t *testing.T) {
	s := fencetest.MustSigner(t, 0)
	tok := fencetest.MustToken(t, s, "press-7", 3, 9, "ctl-a")
	got, err := mustRing(t, s).Verify(tok.Raw)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got.Epoch != 3 || got.Seq != 9 || got.Holder != "ctl-a" || got.Domain != "press-7" || got.IssuedAt != 3009 || got.TTLms != 10000 {
		t.Fatalf("token %+v, want press-7 epoch 3 seq 9 holder ctl-a issued 3009 ttl 10000", got)
	}
	if _, err := mustRing(t, fencetest.MustSigner(t, 1)).Verify(tok.Raw); !errors.Is(err, fence.ErrUnknownKey) {
		t.Fatalf("Verify against another key: %v, want ErrUnknownKey", err)
	}
}

// TestWritePublicKey: the file written loads back as the signer's key.
func TestWritePublicKey(t *testing.T) {
	s := fencetest.MustSigner(t, 5)
	pub, err := fence.LoadPublicKey(fencetest.WritePublicKey(t, t.TempDir(), s))
	if err != nil {
		t.Fatalf("LoadPublicKey: %v", err)
	}
	if !bytes.Equal(pub, s.Public()) {
		t.Fatal("the written public key is not the signer's")
	}
}

func mustRing(t *testing.T, s *fence.Signer) *fence.KeyRing {
	t.Helper()
	r, err := fence.NewKeyRing(16, s.Public())
	if err != nil {
		t.Fatal(err)
	}
	return r
}
