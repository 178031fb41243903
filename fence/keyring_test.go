package fence

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

func TestKeyRotation(t *testing.T) {
	oldSigner := mustSigner(t, testKey(0))
	newSigner := mustSigner(t, testKey(0x20))
	if oldSigner.KeyID() == newSigner.KeyID() {
		t.Fatal("test keys share a key id")
	}
	ring := mustKeyRing(t, 16, oldSigner.Public())

	oldTok := mustSign(t, oldSigner, exampleToken())
	next := exampleToken()
	next.Seq++
	newTok := mustSign(t, newSigner, next)

	if _, err := ring.Verify(newTok.Raw); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("new key not yet trusted: Verify = %v, want ErrUnknownKey", err)
	}
	if err := ring.Add(newSigner.Public()); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if err := ring.Add(newSigner.Public()); err != nil { // adding twice is a no-op
		t.Fatalf("Add again: %v", err)
	}
	wantIDs := []KeyID{oldSigner.KeyID(), newSigner.KeyID()}
	if got := sortedIDs(ring.KeyIDs()); !slices.Equal(got, sortedIDs(wantIDs)) {
		t.Fatalf("KeyIDs = %v, want %v", got, wantIDs)
	}

	steps := []struct {
		name    string
		remove  *KeyID
		wantOld error
		wantNew error
	}{
		{name: "both trusted"},
		{name: "both trusted, from cache"},
		{name: "old key removed", remove: &wantIDs[0], wantOld: ErrUnknownKey},
		{name: "old key stays removed", wantOld: ErrUnknownKey},
		{name: "new key removed too", remove: &wantIDs[1], wantOld: ErrUnknownKey, wantNew: ErrUnknownKey},
	}
	for _, st := range steps {
		if st.remove != nil {
			ring.Remove(*st.remove)
		}
		for _, c := range []struct {
			tok  Token
			want error
		}{{oldTok, st.wantOld}, {newTok, st.wantNew}} {
			got, err := ring.Verify(c.tok.Raw)
			switch {
			case c.want == nil && (err != nil || got != c.tok):
				t.Fatalf("%s: Verify(%v) = %+v, %v; want the token", st.name, c.tok, got, err)
			case c.want != nil:
				if !errors.Is(err, c.want) || got != (Token{}) {
					t.Fatalf("%s: Verify(%v) = %+v, %v; want %v", st.name, c.tok, got, err, c.want)
				}
			}
		}
	}
	if ids := ring.KeyIDs(); len(ids) != 0 {
		t.Fatalf("KeyIDs after removing both = %v", ids)
	}
	if n := ring.cache.len(); n != 0 {
		t.Fatalf("cache holds %d tokens with no key trusted", n)
	}
}

func sortedIDs(ids []KeyID) []KeyID {
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b KeyID) int { return slices.Compare(a[:], b[:]) })
	return ids
}

func TestKeyRingAddRejectsBadKey(t *testing.T) {
	for _, n := range []int{0, 31, 33, 64} {
		ring := mustKeyRing(t, 1)
		if err := ring.Add(make(ed25519.PublicKey, n)); !errors.Is(err, ErrKeyFile) {
			t.Errorf("Add(%d bytes) = %v, want ErrKeyFile", n, err)
		}
		if _, err := NewKeyRing(1, make(ed25519.PublicKey, n)); !errors.Is(err, ErrKeyFile) {
			t.Errorf("NewKeyRing(%d-byte key) = %v, want ErrKeyFile", n, err)
		}
	}
}

func TestKeyRingCopiesKey(t *testing.T) {
	signer := mustSigner(t, testKey(0))
	pub := slices.Clone(signer.Public())
	ring := mustKeyRing(t, 1, pub)
	clear(pub) // the caller reusing its buffer must not change the ring
	if _, err := ring.Verify(mustSign(t, signer, exampleToken()).Raw); err != nil {
		t.Fatalf("Verify after the caller cleared its key: %v", err)
	}
}

func TestVerifyCacheBounded(t *testing.T) {
	signer := mustSigner(t, testKey(0))
	tests := []struct {
		name   string
		size   int
		tokens int
		want   int // cache capacity
	}{
		{name: "size 1", size: 1, tokens: 10, want: 1},
		{name: "size 8", size: 8, tokens: 50, want: 8},
		{name: "fewer tokens than size", size: 64, tokens: 10, want: 64},
		{name: "zero means default", size: 0, tokens: 3, want: DefaultCacheSize},
		{name: "negative means default", size: -5, tokens: 3, want: DefaultCacheSize},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ring := mustKeyRing(t, tc.size, signer.Public())
			if got := len(ring.cache.order); got != tc.want {
				t.Fatalf("cache capacity %d, want %d", got, tc.want)
			}
			toks := make([]Token, tc.tokens)
			for i := range toks {
				tok := exampleToken()
				tok.Seq = uint64(i + 1)
				toks[i] = mustSign(t, signer, tok)
				if _, err := ring.Verify(toks[i].Raw); err != nil {
					t.Fatalf("Verify #%d: %v", i, err)
				}
				if n := ring.cache.len(); n > tc.want || n != min(i+1, tc.want) {
					t.Fatalf("after %d tokens the cache holds %d, want %d", i+1, n, min(i+1, tc.want))
				}
			}
			// The oldest token is evicted once the cache overflows, and still verifies.
			evicted := tc.tokens > tc.want
			if _, cached := ring.cache.get(toks[0].Raw); cached == evicted {
				t.Fatalf("oldest token cached = %v with %d tokens in a cache of %d", cached, tc.tokens, tc.want)
			}
			if got, err := ring.Verify(toks[0].Raw); err != nil || got != toks[0] {
				t.Fatalf("Verify(oldest) = %+v, %v", got, err)
			}
			if _, cached := ring.cache.get(toks[tc.tokens-1].Raw); !cached && tc.want > 1 {
				t.Fatal("newest token is not cached")
			}
		})
	}
}

func TestVerifyCacheRepeatedPut(t *testing.T) {
	c := newVerifiedCache(2)
	a, b := Token{Raw: "a", Seq: 1}, Token{Raw: "b", Seq: 2}
	c.put("a", a)
	c.put("a", a) // must not take a second slot
	c.put("b", b)
	if ta, ok := c.get("a"); !ok || ta != a {
		t.Fatalf("get(a) = %+v, %v after a repeated put", ta, ok)
	}
	c.put("c", Token{Raw: "c"})
	if _, ok := c.get("a"); ok {
		t.Fatal("a survived eviction as the oldest entry")
	}
	if n := c.len(); n != 2 {
		t.Fatalf("len = %d, want 2", n)
	}
	c.clear()
	if _, ok := c.get("b"); ok || c.len() != 0 {
		t.Fatalf("clear left %d entries", c.len())
	}
}

// TestKeyRingConcurrent runs verifications while keys rotate; run with -race.
// Tokens of the key that is never removed must always verify, and a token of
// the rotating key must verify exactly when its key is trusted.
func TestKeyRingConcurrent(t *testing.T) {
	stable := mustSigner(t, testKey(0))
	rotating := mustSigner(t, testKey(0x20))
	ring := mustKeyRing(t, 4, stable.Public())
	var stableToks, rotatingToks []string
	for i := range 8 {
		tok := exampleToken()
		tok.Seq = uint64(i + 1)
		stableToks = append(stableToks, mustSign(t, stable, tok).Raw)
		rotatingToks = append(rotatingToks, mustSign(t, rotating, tok).Raw)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := ring.Verify(stableToks[(i+g)%len(stableToks)]); err != nil {
					errs <- fmt.Errorf("stable token: %w", err)
					return
				}
				if _, err := ring.Verify(rotatingToks[(i+g)%len(rotatingToks)]); err != nil && !errors.Is(err, ErrUnknownKey) {
					errs <- fmt.Errorf("rotating token: %w", err)
					return
				}
			}
		})
	}
	for range 200 {
		if err := ring.Add(rotating.Public()); err != nil {
			t.Fatal(err)
		}
		ring.Remove(rotating.KeyID())
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := ring.Verify(rotatingToks[0]); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("rotating key removed last, but Verify = %v", err)
	}
}
