package lease

import (
	"fmt"

	"github.com/fencegate/fencegate/fence"
)

// Key rotation: the controller signs with its current key and trusts
// further keys (Config.Trusted) for renew and release. A lease signed by
// a trusted key that is not the current one is re-signed at its next
// renewal; its identity (domain, epoch, seq, holder, issued_at) stays, so
// agents take it as the same lease (docs/protocol.md, "Key ids and
// rotation").

// sameLease reports whether tok names the stored lease l: its token, or
// the same lease under another key's signature (before or after a
// re-signing). tok was verified by the caller.
func sameLease(l *LeaseRecord, tok fence.Token) bool {
	if l == nil {
		return false
	}
	if l.Token == tok.Raw {
		return true
	}
	stored, err := fence.ParseUnverified(l.Token)
	return err == nil && stored.SameLease(tok)
}

// resign returns l's token signed with the current key, or a zero token
// if the current key signed it already.
func (c *Controller) resign(l *LeaseRecord) (fence.Token, error) {
	stored, err := fence.ParseUnverified(l.Token)
	if err != nil {
		return fence.Token{}, fmt.Errorf("stored lease token: %w", err)
	}
	if stored.KeyID == c.signer.KeyID() {
		return fence.Token{}, nil
	}
	t, err := c.signer.Sign(stored)
	if err != nil {
		return fence.Token{}, fmt.Errorf("re-sign lease: %w", err)
	}
	return t, nil
}
