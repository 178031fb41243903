package fence

import (
	"crypto/ed25519"
	"encoding/hex"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

// edgeEncodings are 32-byte point encodings on which Ed25519 implementations
// are known to disagree ("Taming the many EdDSAs", Chalkias et al. 2020):
// the eight small-order points and non-canonical encodings of y ≥ p.
var edgeEncodings = func() [][]byte {
	hexes := []string{
		"0100000000000000000000000000000000000000000000000000000000000000",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"0000000000000000000000000000000000000000000000000000000000000080",
		"0000000000000000000000000000000000000000000000000000000000000000",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
		"0100000000000000000000000000000000000000000000000000000000000080",
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
		"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
	}
	out := make([][]byte, len(hexes))
	for i, h := range hexes {
		out[i], _ = hex.DecodeString(h)
	}
	return out
}()

// groupOrder is L, the order of the Ed25519 base point; S and S+L are the
// same scalar, and only the canonical one may verify.
var groupOrder, _ = new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)

// addOrder returns the little-endian 32-byte encoding of s+L (s little endian).
func addOrder(s []byte) []byte {
	be := make([]byte, 32)
	for i := range s {
		be[31-i] = s[i]
	}
	n := new(big.Int).Add(new(big.Int).SetBytes(be), groupOrder)
	out := make([]byte, 32)
	for i, b := range n.FillBytes(make([]byte, 32)) {
		out[31-i] = b
	}
	return out
}

// TestTrustedKeyVerifiesAsStdlib pins the precomputed check to the definition
// every other part of fencegate uses, crypto/ed25519.Verify: across honest
// signatures, tampered ones, small-order and non-canonical keys and R values,
// zero and non-canonical S, and other messages, both give the same answer.
func TestTrustedKeyVerifiesAsStdlib(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.SliceOfN(rapid.Byte(), ed25519.SeedSize, ed25519.SeedSize).Draw(t, "seed")
		priv := ed25519.NewKeyFromSeed(seed)
		msg := rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(t, "msg")
		sig := ed25519.Sign(priv, msg)
		pub := priv.Public().(ed25519.PublicKey)

		switch rapid.IntRange(0, 2).Draw(t, "key") {
		case 1:
			pub = rapid.SampledFrom(edgeEncodings).Draw(t, "edgeKey")
		case 2:
			pub = rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "randomKey")
		}
		r, s := append([]byte(nil), sig[:32]...), append([]byte(nil), sig[32:]...)
		switch rapid.IntRange(0, 3).Draw(t, "r") {
		case 1:
			r = rapid.SampledFrom(edgeEncodings).Draw(t, "edgeR")
		case 2:
			r[rapid.IntRange(0, 31).Draw(t, "rByte")] ^= 1 << rapid.IntRange(0, 7).Draw(t, "rBit")
		case 3:
			r = rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "randomR")
		}
		switch rapid.IntRange(0, 3).Draw(t, "s") {
		case 1:
			s = make([]byte, 32)
		case 2:
			s = addOrder(s)
		case 3:
			s[rapid.IntRange(0, 31).Draw(t, "sByte")] ^= 1 << rapid.IntRange(0, 7).Draw(t, "sBit")
		}
		if rapid.Bool().Draw(t, "otherMsg") {
			msg = append(msg, rapid.Byte().Draw(t, "extra"))
		}
		sig = append(r, s...)

		want := ed25519.Verify(pub, msg, sig)
		if got := newTrustedKey(pub).verify(msg, sig); got != want {
			t.Fatalf("precomputed check says %v, crypto/ed25519 says %v (key %x, sig %x)", got, want, pub, sig)
		}
	})
}

// TestTrustedKeyEdgeCombinations checks every pairing of an edge key with an
// edge R and S = 0, the forgeries a lax verifier accepts for small-order keys.
func TestTrustedKeyEdgeCombinations(t *testing.T) {
	msgs := [][]byte{nil, []byte("fencegate")}
	accepted := 0
	for _, pub := range edgeEncodings {
		k := newTrustedKey(pub)
		for _, r := range edgeEncodings {
			sig := append(append([]byte(nil), r...), make([]byte, 32)...)
			for _, m := range msgs {
				want := ed25519.Verify(pub, m, sig)
				if got := k.verify(m, sig); got != want {
					t.Errorf("key %x R %x msg %q: precomputed %v, crypto/ed25519 %v", pub, r, m, got, want)
				}
				if want {
					accepted++
				}
			}
		}
	}
	if accepted == 0 {
		t.Fatal("no edge combination verifies under crypto/ed25519; the table no longer exercises small-order acceptance")
	}
	t.Logf("%d edge combinations verify under both", accepted)
}

// TestTrustedKeyShortSignature: a signature of the wrong length is rejected,
// not a panic.
func TestTrustedKeyShortSignature(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	k := newTrustedKey(priv.Public().(ed25519.PublicKey))
	sig := ed25519.Sign(priv, []byte("m"))
	for _, bad := range [][]byte{nil, sig[:63], append(sig, 0)} {
		if k.verify([]byte("m"), bad) {
			t.Errorf("signature of %d bytes verified", len(bad))
		}
	}
	if !k.verify([]byte("m"), sig) {
		t.Fatal("an honest signature did not verify")
	}
}
