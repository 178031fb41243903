package fence

import (
	"fmt"
	"time"
)

// Token names one lease of one fencing domain. The zero Token is "no token".
//
// A Token obtained from KeyRing.Verify or Signer.Sign carries its wire form
// (Raw); one built by hand does not until it is signed.
type Token struct {
	Domain   string // fencing domain, a valid id
	Epoch    uint64 // controller store generation; > 0
	Seq      uint64 // per-domain counter, never reused; > 0
	Holder   string // who holds the lease, a valid id
	IssuedAt int64  // Unix milliseconds at the controller, informational
	TTLms    uint32 // lease time to live in milliseconds, informational; > 0
	KeyID    KeyID  // id of the signing key

	// Raw is the signed wire form, "fg1.…", set by Sign and Verify.
	Raw string
}

// Fence is the part of a token that agents report back: the lease a device
// is fenced at. Its JSON form is the protocol's "fence" object.
type Fence struct {
	Epoch  uint64 `json:"epoch"`
	Seq    uint64 `json:"seq"`
	Holder string `json:"holder"`
}

// Fence returns the token's (epoch, seq, holder).
func (t Token) Fence() Fence {
	return Fence{Epoch: t.Epoch, Seq: t.Seq, Holder: t.Holder}
}

// IsZero reports whether t is the zero Token ("no token yet").
func (t Token) IsZero() bool { return t.Epoch == 0 && t.Seq == 0 && t.Domain == "" }

// Issued returns IssuedAt as a time.
func (t Token) Issued() time.Time { return time.UnixMilli(t.IssuedAt) }

// TTL returns TTLms as a duration.
func (t Token) TTL() time.Duration { return time.Duration(t.TTLms) * time.Millisecond }

// Validate checks the fields a token must have to be encoded: valid domain and
// holder ids and non-zero epoch, seq and TTL.
func (t Token) Validate() error {
	if err := CheckID("domain", t.Domain); err != nil {
		return err
	}
	if err := CheckID("holder", t.Holder); err != nil {
		return err
	}
	switch {
	case t.Epoch == 0:
		return fmt.Errorf("%w: epoch is 0", ErrInvalidField)
	case t.Seq == 0:
		return fmt.Errorf("%w: seq is 0", ErrInvalidField)
	case t.TTLms == 0:
		return fmt.Errorf("%w: ttl_ms is 0", ErrInvalidField)
	}
	return nil
}

// Compare orders t and u by (epoch, seq): -1 if t is older, 0 if they name the
// same position, +1 if t is newer. Tokens of different domains do not compare:
// the result is ErrDomainMismatch.
//
// Equal positions with different holders cannot come from one controller; use
// SameLease to tell them apart.
func (t Token) Compare(u Token) (int, error) {
	if t.Domain != u.Domain {
		return 0, fmt.Errorf("%w: %q and %q", ErrDomainMismatch, t.Domain, u.Domain)
	}
	return ComparePosition(t.Epoch, t.Seq, u.Epoch, u.Seq), nil
}

// ComparePosition orders (epoch1, seq1) against (epoch2, seq2)
// lexicographically: -1, 0 or +1.
func ComparePosition(epoch1, seq1, epoch2, seq2 uint64) int {
	switch {
	case epoch1 < epoch2:
		return -1
	case epoch1 > epoch2:
		return 1
	case seq1 < seq2:
		return -1
	case seq1 > seq2:
		return 1
	}
	return 0
}

// SameLease reports whether t and u name the same lease: same domain, epoch,
// seq, holder and issue time. Two tokens at one position that are not the
// same lease mean a forgery or a controller bug, and must be rejected.
func (t Token) SameLease(u Token) bool {
	return t.Domain == u.Domain && t.Epoch == u.Epoch && t.Seq == u.Seq &&
		t.Holder == u.Holder && t.IssuedAt == u.IssuedAt
}

// String returns a short human form, "domain@epoch.seq/holder".
func (t Token) String() string {
	return fmt.Sprintf("%s@%d.%d/%s", t.Domain, t.Epoch, t.Seq, t.Holder)
}
