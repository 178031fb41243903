package fence

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
)

// a15SmallOrder are the eight small-order points, canonically encoded.
var a15SmallOrder = func() []*curve.EdwardsPoint {
	hexes := []string{
		"0100000000000000000000000000000000000000000000000000000000000000",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"0000000000000000000000000000000000000000000000000000000000000080",
		"0000000000000000000000000000000000000000000000000000000000000000",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
	}
	out := make([]*curve.EdwardsPoint, len(hexes))
	for i, h := range hexes {
		b, _ := hex.DecodeString(h)
		c, err := curve.NewCompressedEdwardsYFromBytes(b)
		if err != nil {
			panic(err)
		}
		var p curve.EdwardsPoint
		if _, err := p.SetCompressedY(c); err != nil {
			panic(err)
		}
		if !p.IsSmallOrder() {
			panic("not small order: " + h)
		}
		out[i] = &p
	}
	return out
}()

// a15AllEdgeKeys: every small-order point in canonical form, with its sign
// bit flipped, and the non-canonical y = p, p+1 spellings with both signs.
var a15AllEdgeKeys = func() [][]byte {
	var out [][]byte
	for _, p := range a15SmallOrder {
		b := a15Enc(p)
		out = append(out, b)
		f := append([]byte(nil), b...)
		f[31] ^= 0x80
		out = append(out, f)
	}
	for _, h := range []string{
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
	} {
		b, _ := hex.DecodeString(h)
		out = append(out, b)
	}
	return out
}()

func a15Enc(p *curve.EdwardsPoint) []byte {
	var c curve.CompressedEdwardsY
	c.SetEdwardsPoint(p)
	return append([]byte(nil), c[:]...)
}

func a15Scalar(t testing.TB, s *scalar.Scalar) []byte {
	out := make([]byte, 32)
	if err := s.ToBytes(out); err != nil {
		t.Fatal(err)
	}
	return out
}

func a15RandScalar(t testing.TB) *scalar.Scalar {
	var wide [64]byte
	if _, err := rand.Read(wide[:]); err != nil {
		t.Fatal(err)
	}
	s, err := scalar.NewFromBytesModOrderWide(wide[:])
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func a15Hram(t testing.TB, r, a, msg []byte) *scalar.Scalar {
	h := sha512.New()
	h.Write(r)
	h.Write(a)
	h.Write(msg)
	k, err := scalar.NewFromBytesModOrderWide(h.Sum(nil))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func a15Check(t *testing.T, pub, msg, sig []byte) bool {
	t.Helper()
	want := ed25519.Verify(pub, msg, sig)
	if got := newTrustedKey(pub).verify(msg, sig); got != want {
		t.Errorf("key %x sig %x msg %x: precomputed %v, crypto/ed25519 %v", pub, sig, msg, got, want)
	}
	return want
}

// Mixed-order keys A = [a]B + T with signatures R = [r]B + T', S = r + k·a:
// the cofactorless equation holds exactly when -[k mod L]T = T'. Both
// verifiers must agree on every one, and some must verify (else the test
// exercises nothing).
func TestAttack15MixedOrderKeysMatchStdlib(t *testing.T) {
	accepted, total := 0, 0
	for ti, T := range a15SmallOrder {
		a := a15RandScalar(t)
		var A curve.EdwardsPoint
		A.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, a)
		A.Add(&A, T)
		pub := a15Enc(&A)
		for m := range 24 {
			msg := []byte(fmt.Sprintf("fencegate token v1\x00mixed %d %d", ti, m))
			for _, T2 := range a15SmallOrder {
				r := a15RandScalar(t)
				var R curve.EdwardsPoint
				R.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, r)
				R.Add(&R, T2)
				rb := a15Enc(&R)
				k := a15Hram(t, rb, pub, msg)
				var S scalar.Scalar
				S.Mul(k, a)
				S.Add(&S, r)
				sb := a15Scalar(t, &S)
				sig := append(append([]byte(nil), rb...), sb...)
				total++
				if a15Check(t, pub, msg, sig) {
					accepted++
				}
				// Same signature with S+L: never valid.
				a15Check(t, pub, msg, append(append([]byte(nil), rb...), addOrder(sb)...))
			}
		}
	}
	if accepted == 0 {
		t.Fatalf("no mixed-order signature verified under crypto/ed25519 (%d tried)", total)
	}
	t.Logf("%d of %d mixed-order signatures verify under both", accepted, total)
}

// Small-order keys (every spelling, canonical or not) with R = [S]B + T' for
// S in {0, 1, L-1, values with the top nibble set just below and at L}, over
// many messages: forgeries crypto/ed25519 accepts must be accepted, the
// rest rejected, by the precomputed check and by KeyRing.Verify on tokens.
func TestAttack15SmallOrderKeysManyMessagesMatchStdlib(t *testing.T) {
	lMinus := func(n uint64) []byte { // L - n, little endian
		be := groupOrder.Bytes()
		le := make([]byte, 32)
		for i := range be {
			le[len(be)-1-i] = be[i]
		}
		// subtract n (small) with borrow
		borrow := n
		for i := 0; i < 32 && borrow > 0; i++ {
			v := uint64(le[i])
			if v >= borrow&0xff {
				le[i] = byte(v - borrow&0xff)
				borrow >>= 8
			} else {
				le[i] = byte(v + 256 - borrow&0xff)
				borrow = (borrow >> 8) + 1
			}
		}
		return le
	}
	two252 := make([]byte, 32)
	two252[31] = 0x10
	sValues := [][]byte{make([]byte, 32), {1}, lMinus(1), lMinus(1 << 40), two252}
	for i, s := range sValues {
		if len(s) < 32 {
			sValues[i] = append(s, make([]byte, 32-len(s))...)
		}
	}
	accepted, total := 0, 0
	for _, pub := range a15AllEdgeKeys {
		for si, sb := range sValues {
			S, err := scalar.NewFromCanonicalBytes(sb)
			if err != nil {
				t.Fatalf("S %d not canonical: %v", si, err)
			}
			var SB curve.EdwardsPoint
			SB.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, S)
			for m := range 8 {
				msg := []byte(fmt.Sprintf("msg %d", m))
				for _, T2 := range a15SmallOrder {
					var R curve.EdwardsPoint
					R.Add(&SB, T2)
					rb := a15Enc(&R)
					total++
					if a15Check(t, pub, msg, append(append([]byte(nil), rb...), sb...)) {
						accepted++
					}
					// R with its sign bit flipped (negative zero for x = 0) and S+L.
					rf := append([]byte(nil), rb...)
					rf[31] ^= 0x80
					a15Check(t, pub, msg, append(rf, sb...))
					a15Check(t, pub, msg, append(append([]byte(nil), rb...), addOrder(sb)...))
				}
			}
		}
	}
	if accepted == 0 {
		t.Fatal("no small-order forgery verified under crypto/ed25519")
	}
	t.Logf("%d of %d small-order forgeries verify under both", accepted, total)

	// Through the key ring on the token framing: a forged token body for each
	// small-order key, S = 0, R from the eight small-order points.
	ringAccepted := 0
	for _, pub := range a15AllEdgeKeys {
		ring, err := NewKeyRing(0, ed25519.PublicKey(pub))
		if err != nil {
			t.Fatal(err)
		}
		for seq := uint64(1); seq <= 8; seq++ {
			tok := Token{Domain: "plant", Epoch: 1, Seq: seq, Holder: "evil", TTLms: 1, KeyID: KeyIDOf(pub)}
			body := encodeBody(tok)
			msg := signedMessage(body)
			for _, T2 := range a15SmallOrder {
				sig := append(a15Enc(T2), make([]byte, 32)...)
				want := ed25519.Verify(pub, msg, sig)
				_, err := ring.Verify(encodeWire(body, sig))
				if got := err == nil; got != want {
					t.Errorf("key %x seq %d R %x: ring.Verify ok=%v (%v), crypto/ed25519 %v", pub, seq, sig[:32], got, err, want)
				}
				if want {
					ringAccepted++
				}
			}
		}
	}
	if ringAccepted == 0 {
		t.Fatal("no forged token verified under crypto/ed25519; the ring part exercises nothing")
	}
	t.Logf("%d forged small-order tokens verify under both", ringAccepted)
}

// Rotation: a removed key stops verifying at once (cached or not), a
// re-added key verifies again, and adding a key never makes another key's
// tokens verify.
func TestAttack15RotationNoStaleExpandedKey(t *testing.T) {
	s1, s2 := a15Signer(t, 1), a15Signer(t, 2)
	ring, err := NewKeyRing(0, s1.Public())
	if err != nil {
		t.Fatal(err)
	}
	t1 := a15Sign(t, s1, 1)
	t2 := a15Sign(t, s2, 2)
	if _, err := ring.Verify(t1.Raw); err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Verify(t2.Raw); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("t2 before its key: %v", err)
	}
	if err := ring.Add(s2.Public()); err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Verify(t2.Raw); err != nil {
		t.Fatal(err)
	}
	ring.Remove(s1.KeyID())
	if _, err := ring.Verify(t1.Raw); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("t1 after its key was removed: %v", err)
	}
	// A token naming s2's id but signed by s1 (key-id substitution).
	forged := Token{Domain: "plant", Epoch: 1, Seq: 9, Holder: "evil", TTLms: 1, KeyID: s2.KeyID()}
	body := encodeBody(forged)
	sig := ed25519.Sign(s1.priv, signedMessage(body))
	if _, err := ring.Verify(encodeWire(body, sig)); !errors.Is(err, ErrSignature) {
		t.Fatalf("s1 signature under s2's id: %v", err)
	}
	if err := ring.Add(s1.Public()); err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Verify(t1.Raw); err != nil {
		t.Fatalf("t1 after re-adding its key: %v", err)
	}
}

// Concurrent Add/Remove/Verify (run with -race): tokens of the stable key
// always verify, and once the churned key is finally removed its tokens
// never verify.
func TestAttack15ConcurrentRotation(t *testing.T) {
	s1, s2 := a15Signer(t, 3), a15Signer(t, 4)
	ring, err := NewKeyRing(8, s1.Public())
	if err != nil {
		t.Fatal(err)
	}
	stable := make([]Token, 16)
	churn := make([]Token, 16)
	for i := range stable {
		stable[i] = a15Sign(t, s1, uint64(i+1))
		churn[i] = a15Sign(t, s2, uint64(i+1))
	}
	var churner, verifiers sync.WaitGroup
	stop := make(chan struct{})
	churner.Add(1)
	go func() {
		defer churner.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				_ = ring.Add(s2.Public())
			} else {
				ring.Remove(s2.KeyID())
			}
		}
	}()
	errs := make(chan error, 3)
	for g := range 3 {
		verifiers.Add(1)
		go func() {
			defer verifiers.Done()
			for i := range 3000 {
				if _, err := ring.Verify(stable[(i+g)%len(stable)].Raw); err != nil {
					errs <- fmt.Errorf("stable token: %w", err)
					return
				}
				_, _ = ring.Verify(churn[(i+g)%len(churn)].Raw)
			}
		}()
	}
	verifiers.Wait()
	close(stop)
	churner.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ring.Remove(s2.KeyID())
	for _, tok := range churn {
		if _, err := ring.Verify(tok.Raw); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("churned token after final Remove: %v", err)
		}
	}
}

func a15Signer(t *testing.T, seed byte) *Signer {
	t.Helper()
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	priv := ed25519.NewKeyFromSeed(s)
	return &Signer{priv: priv, id: KeyIDOf(priv.Public().(ed25519.PublicKey))}
}

func a15Sign(t *testing.T, s *Signer, seq uint64) Token {
	t.Helper()
	tok, err := s.Sign(Token{Domain: "plant", Epoch: 1, Seq: seq, Holder: "h", TTLms: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
