package benchload

import (
	"crypto/ed25519"
	"fmt"
	"slices"

	"github.com/fencegate/fencegate/fence"
)

// The lease the pool's tokens name: epoch TokenEpoch of domain TokenDomain,
// held by TokenHolder; token i has seq i+1.
const (
	TokenDomain = "bench"
	TokenHolder = "bench-ctl"
	TokenEpoch  = 1
)

// Tokens is a pool of signed tokens at advancing positions of one domain:
// At(i) has seq i+1. Devices' fences are independent, so every device walks
// the same pool. Signing happens in Grow, outside any measurement.
//
// Grow must not run concurrently with other methods; Len and At are safe
// for concurrent use between Grows.
type Tokens struct {
	signer *fence.Signer
	toks   []fence.Token
}

// NewTokens returns a pool of one token, signed with a fixed test key.
func NewTokens() (*Tokens, error) {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(0xb0 + i)
	}
	s, err := fence.NewSigner(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	p := &Tokens{signer: s}
	return p, p.Grow(1)
}

// Grow signs tokens until the pool holds at least n.
func (p *Tokens) Grow(n int) error {
	p.toks = slices.Grow(p.toks, max(n-len(p.toks), 0))
	for len(p.toks) < n {
		seq := uint64(len(p.toks)) + 1
		tok, err := p.signer.Sign(fence.Token{Domain: TokenDomain, Epoch: TokenEpoch, Seq: seq,
			Holder: TokenHolder, IssuedAt: 1767225600000 + int64(seq), TTLms: 10000})
		if err != nil {
			return fmt.Errorf("tokens: %w", err)
		}
		p.toks = append(p.toks, tok)
	}
	return nil
}

// Len returns the number of tokens in the pool.
func (p *Tokens) Len() int { return len(p.toks) }

// At returns token i (seq i+1), or the last token if i >= Len.
func (p *Tokens) At(i int) fence.Token { return p.toks[min(i, len(p.toks)-1)] }
