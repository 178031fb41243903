package fence

import "testing"

// benchPool signs n distinct tokens (seq 1..n) with testKey(0).
func benchPool(b *testing.B, signer *Signer, n int) []string {
	pool := make([]string, n)
	for i := range pool {
		tok := exampleToken()
		tok.Seq = uint64(i + 1)
		pool[i] = mustSign(b, signer, tok).Raw
	}
	return pool
}

// BenchmarkVerifyCold measures a verification that misses the cache: the ring
// remembers one token and consecutive iterations verify different ones, so
// every iteration decodes and checks an Ed25519 signature.
func BenchmarkVerifyCold(b *testing.B) {
	signer := mustSigner(b, testKey(0))
	pool := benchPool(b, signer, 1024)
	ring := mustKeyRing(b, 1, signer.Public())
	for _, raw := range pool[:2] {
		if _, err := ring.Verify(raw); err != nil {
			b.Fatal(err)
		}
	}
	if _, hit := ring.cache.get(pool[0]); hit {
		b.Fatal("a cache of size 1 still holds the token before last: iterations would not check signatures")
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := ring.Verify(pool[i%len(pool)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyCached measures the common case: a stream of commands under
// one lease presents the same token again and again.
func BenchmarkVerifyCached(b *testing.B) {
	signer := mustSigner(b, testKey(0))
	raw := mustSign(b, signer, exampleToken()).Raw
	ring := mustKeyRing(b, 0, signer.Public())
	if _, err := ring.Verify(raw); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ring.Verify(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSign(b *testing.B) {
	signer := mustSigner(b, testKey(0))
	tok := exampleToken()
	b.ReportAllocs()
	for b.Loop() {
		tok.Seq++
		if _, err := signer.Sign(tok); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseUnverified(b *testing.B) {
	raw := mustSign(b, mustSigner(b, testKey(0)), exampleToken()).Raw
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseUnverified(raw); err != nil {
			b.Fatal(err)
		}
	}
}
