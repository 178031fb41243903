package fence

import (
	"crypto/ed25519"
	"errors"
	"math"
	"math/big"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// positionGen draws epochs and seqs: often small, so equal positions and
// ties in one coordinate are common, sometimes extreme, otherwise anything.
var positionGen = rapid.OneOf(
	rapid.Uint64Range(0, 3),
	rapid.SampledFrom([]uint64{1, 1 << 32, 1<<63 - 1, 1 << 63, math.MaxUint64 - 1, math.MaxUint64}),
	rapid.Uint64(),
)

// idGen draws valid ids: 1 to MaxIDLen bytes of [A-Za-z0-9._-].
var idGen = rapid.StringOfN(rapid.RuneFrom([]rune(idAlphabet)), 1, MaxIDLen, -1)

func drawAt(t *rapid.T, label, domain string) Token {
	return Token{
		Domain: domain,
		Epoch:  positionGen.Draw(t, label+".epoch"),
		Seq:    positionGen.Draw(t, label+".seq"),
		Holder: "h",
		TTLms:  1,
	}
}

// position128 is (epoch, seq) as the 128-bit number epoch·2⁶⁴ + seq.
func position128(tok Token) *big.Int {
	p := new(big.Int).SetUint64(tok.Epoch)
	p.Lsh(p, 64)
	return p.Add(p, new(big.Int).SetUint64(tok.Seq))
}

func mustCompare(t *rapid.T, a, b Token) int {
	c, err := a.Compare(b)
	if err != nil {
		t.Fatalf("Compare(%v, %v): %v", a, b, err)
	}
	if c < -1 || c > 1 {
		t.Fatalf("Compare(%v, %v) = %d, want -1, 0 or +1", a, b, c)
	}
	return c
}

func TestPropertyOrderIsStrictTotal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := drawAt(t, "a", "d"), drawAt(t, "b", "d"), drawAt(t, "c", "d")
		ab, ba, bc, ac := mustCompare(t, a, b), mustCompare(t, b, a), mustCompare(t, b, c), mustCompare(t, a, c)

		if mustCompare(t, a, a) != 0 {
			t.Fatalf("%v is not equal to itself", a)
		}
		if ab != -ba {
			t.Fatalf("antisymmetry: Compare(a,b) = %d, Compare(b,a) = %d", ab, ba)
		}
		// Exactly one of <, =, > holds, and = means the same (epoch, seq).
		if (ab == 0) != (a.Epoch == b.Epoch && a.Seq == b.Seq) {
			t.Fatalf("Compare(%v, %v) = 0 disagrees with field equality", a, b)
		}
		if want := position128(a).Cmp(position128(b)); ab != want {
			t.Fatalf("Compare(%v, %v) = %d, 128-bit positions compare %d", a, b, ab, want)
		}
		if p := ComparePosition(a.Epoch, a.Seq, b.Epoch, b.Seq); p != ab {
			t.Fatalf("ComparePosition = %d, Compare = %d", p, ab)
		}
		// Transitivity of ≤ and of <.
		if ab <= 0 && bc <= 0 {
			want := 0
			if ab < 0 || bc < 0 {
				want = -1
			}
			if ac != want {
				t.Fatalf("transitivity: a?b = %d, b?c = %d, but a?c = %d", ab, bc, ac)
			}
		}
	})
}

func TestPropertySortMatches128Bit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 20).Draw(t, "n")
		toks := make([]Token, n)
		for i := range toks {
			toks[i] = drawAt(t, "tok", "d")
		}
		byCompare := slices.Clone(toks)
		slices.SortStableFunc(byCompare, func(a, b Token) int { return mustCompare(t, a, b) })
		by128 := slices.Clone(toks)
		slices.SortStableFunc(by128, func(a, b Token) int { return position128(a).Cmp(position128(b)) })
		if !slices.Equal(byCompare, by128) {
			t.Fatalf("sorted by Compare %v, by 128-bit position %v", byCompare, by128)
		}
	})
}

func TestPropertyNoOrderAcrossDomains(t *testing.T) {
	domains := rapid.SampledFrom([]string{"a", "b", "press-7"})
	rapid.Check(t, func(t *rapid.T) {
		a := drawAt(t, "a", domains.Draw(t, "a.domain"))
		b := drawAt(t, "b", domains.Draw(t, "b.domain"))
		c, err := a.Compare(b)
		if a.Domain == b.Domain {
			if err != nil {
				t.Fatalf("Compare within %q: %v", a.Domain, err)
			}
			return
		}
		if !errors.Is(err, ErrDomainMismatch) || c != 0 {
			t.Fatalf("Compare(%v, %v) = %d, %v; want 0, ErrDomainMismatch", a, b, c, err)
		}
	})
}

func TestPropertySignVerifyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.SliceOfN(rapid.Byte(), ed25519.SeedSize, ed25519.SeedSize).Draw(t, "seed")
		signer := mustSigner(t, ed25519.NewKeyFromSeed(seed))
		ring := mustKeyRing(t, 1, signer.Public())
		tok := Token{
			Domain:   idGen.Draw(t, "domain"),
			Epoch:    rapid.Uint64Min(1).Draw(t, "epoch"),
			Seq:      rapid.Uint64Min(1).Draw(t, "seq"),
			Holder:   idGen.Draw(t, "holder"),
			IssuedAt: rapid.Int64().Draw(t, "issued_at"),
			TTLms:    rapid.Uint32Min(1).Draw(t, "ttl_ms"),
		}
		signed := mustSign(t, signer, tok)
		if len(signed.Raw) > MaxTokenLen {
			t.Fatalf("wire form is %d bytes, over %d", len(signed.Raw), MaxTokenLen)
		}
		want := tok
		want.KeyID = signer.KeyID()
		want.Raw = signed.Raw
		if signed != want {
			t.Fatalf("Sign = %+v, want %+v", signed, want)
		}
		got, err := ring.Verify(signed.Raw)
		if err != nil || got != want {
			t.Fatalf("Verify = %+v, %v; want %+v", got, err, want)
		}
		parsed, err := ParseUnverified(signed.Raw)
		if err != nil || parsed != want {
			t.Fatalf("ParseUnverified = %+v, %v; want %+v", parsed, err, want)
		}
	})
}

func TestPropertyInvalidIDRejected(t *testing.T) {
	bad := rapid.Byte().Filter(func(c byte) bool { return !idByte(c) })
	signer := mustSigner(t, testKey(0))
	rapid.Check(t, func(t *rapid.T) {
		id := idGen.Draw(t, "id")
		at := rapid.IntRange(0, len(id)).Draw(t, "at")
		id = id[:at] + string(bad.Draw(t, "bad")) + id[at:]
		if ValidID(id) {
			t.Fatalf("ValidID(%q) = true", id)
		}
		tok := exampleToken()
		if rapid.Bool().Draw(t, "in holder") {
			tok.Holder = id
		} else {
			tok.Domain = id
		}
		if _, err := signer.Sign(tok); !errors.Is(err, ErrInvalidID) {
			t.Fatalf("Sign with id %q = %v, want ErrInvalidID", id, err)
		}
	})
}
