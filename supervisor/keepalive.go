package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// keepalive renews the lease about every third of its TTL until it is lost
// (or released, or its client closed); it runs in the goroutine that
// Client.startKeepalive starts, which Release and Client.Close wait for.
// A renewal counts from when it was sent, and waits at most half a TTL (and
// never past the current validity) for an answer. When validity runs out
// without a confirmed renewal — the controller unreachable, or this process
// paused — the lease is lost before anything else is tried.
func (l *Lease) keepalive() {
	wait := l.ttl / 3
	for {
		select {
		case <-time.After(wait):
		case <-l.ctx.Done():
			return
		}
		if time.Now().After(l.ValidUntil()) {
			l.lose(errors.New("no renewal confirmed within the TTL"))
			return
		}
		if l.renewOnce() {
			wait = l.ttl / 3
		} else {
			wait = max(l.ttl/10, 10*time.Millisecond)
		}
	}
}

// renewOnce sends one renewal and reports whether it was confirmed; it
// is abandoned at once when the lease is lost. A refusal (expired,
// not_holder) loses the lease.
func (l *Lease) renewOnce() bool {
	sent := time.Now()
	deadline := sent.Add(l.ttl / 2)
	if v := l.ValidUntil(); v.Before(deadline) {
		deadline = v
	}
	ctx, cancel := context.WithDeadline(l.ctx, deadline)
	defer cancel()
	resp, err := l.c.leaseCall(ctx, l.domain, protocol.OpRenew, protocol.Request{Token: l.Token()}, 0)
	switch {
	case err != nil:
		return false
	case resp.Code == protocol.CodeRenewed:
		l.adopt(resp.Token)
		l.confirm(sent)
		return true
	case resp.Code == protocol.CodeExpired || resp.Code == protocol.CodeNotHolder:
		l.lose(fmt.Errorf("renewal refused: %s", resp.Code))
	}
	return false
}

// adopt takes the token a renewal answered with if it names the same
// lease under another signature — the controller re-signed it with a
// rotated key — so later commands and renewals carry the new key's
// signature. Anything else is ignored: the lease keeps its token.
func (l *Lease) adopt(raw string) {
	cur := l.token.Load()
	if raw == "" || raw == cur.Raw {
		return
	}
	t, err := fence.ParseUnverified(raw)
	if err != nil || !t.SameLease(*cur) {
		return
	}
	l.token.CompareAndSwap(cur, &t)
}
