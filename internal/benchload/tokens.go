package benchload

import (
	"crypto/ed25519"
	"fmt"
	"slices"

	"github.com/fencegate/fencegate/fence"
)

// The leases the pool's tokens name: epoch TokenEpoch of domain
// TokenDomain(dev) for device dev, held by TokenHolder; token i has seq i+1.
const (
	TokenHolder = "bench-ctl"
	TokenEpoch  = 1
)

// TokenDomain is device dev's fencing domain: each device is a domain of
// its own, as devices are by default, so devices' fences are independent.
func TokenDomain(dev int) string { return "bench-" + DeviceID(dev) }

// Tokens is a pool of signed tokens at advancing positions, per device:
// At(dev, i) has seq i+1 in TokenDomain(dev). Signing happens in Grow,
// outside any measurement.
//
// Grow must not run concurrently with other methods; Len and At are safe
// for concurrent use between Grows.
type Tokens struct {
	signer *fence.Signer
	toks   [][]fence.Token // by device
}

// NewTokens returns a pool of one token for device 0, signed with a fixed
// test key.
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
	return p, p.Grow(1, 1)
}

// Grow signs tokens until each of devices devices has at least n.
func (p *Tokens) Grow(devices, n int) error {
	for len(p.toks) < devices {
		p.toks = append(p.toks, nil)
	}
	for dev := range devices {
		if err := p.grow(dev, n); err != nil {
			return err
		}
	}
	return nil
}

func (p *Tokens) grow(dev, n int) error {
	toks := slices.Grow(p.toks[dev], max(n-len(p.toks[dev]), 0))
	for len(toks) < n {
		seq := uint64(len(toks)) + 1
		tok, err := p.signer.Sign(fence.Token{Domain: TokenDomain(dev), Epoch: TokenEpoch, Seq: seq,
			Holder: TokenHolder, IssuedAt: 1767225600000 + int64(seq), TTLms: 10000})
		if err != nil {
			return fmt.Errorf("tokens: %w", err)
		}
		toks = append(toks, tok)
	}
	p.toks[dev] = toks
	return nil
}

// Len returns the number of tokens of device dev.
func (p *Tokens) Len(dev int) int { return len(p.toks[dev]) }

// At returns device dev's token i (seq i+1), or its last token if i >= Len.
func (p *Tokens) At(dev, i int) fence.Token {
	toks := p.toks[dev]
	return toks[min(i, len(toks)-1)]
}

// PublicKey returns the public key that verifies the pool's tokens.
func (p *Tokens) PublicKey() ed25519.PublicKey { return p.signer.Public() }
