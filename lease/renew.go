package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// lockFor verifies the token req names and locks its domain if the
// controller or the store knows it (see lockExisting); on error, or for an
// unknown domain (nil), nothing is locked. The caller ends with c.done.
func (c *Controller) lockFor(ctx context.Context, name string, req protocol.Request) (fence.Token, *domain, error) {
	tok, err := c.verify(name, req)
	if err != nil {
		return fence.Token{}, nil, err
	}
	d, err := c.lockExisting(ctx, name)
	return tok, d, err
}

// renew extends the live lease req.Token names, keeping its token — or,
// if another trusted key signed it (a key rotation), re-signing the same
// lease with the current key: same domain, position, holder and issue
// time, stored before it is answered and then announced (OnGrant).
func (c *Controller) renew(ctx context.Context, name string, req protocol.Request) (protocol.Response, error) {
	tok, d, err := c.lockFor(ctx, name, req)
	if err != nil || d == nil {
		return protocol.Response{Code: protocol.CodeNotHolder}, err
	}
	resp, resigned, err := c.renewLocked(ctx, name, d, tok, req)
	c.done(name, d)
	if resigned.Raw != "" && c.onGrant != nil {
		c.onGrant(resigned)
	}
	return resp, err
}

// renewLocked is renew with d locked; resigned is set when the lease was
// re-signed with the current key.
func (c *Controller) renewLocked(ctx context.Context, name string, d *domain, tok fence.Token, req protocol.Request) (protocol.Response, fence.Token, error) {
	now := c.clock.Now()
	if resp, ok := current(d, tok, now); !ok {
		return resp, fence.Token{}, nil
	}
	l := d.rec.Lease
	ttl := l.TTLms
	changed := req.TTLms != 0 && req.TTLms != ttl
	if changed {
		ttl = req.TTLms
	}
	resigned, err := c.resign(l)
	if err != nil {
		return protocol.Response{}, fence.Token{}, err
	}
	if changed || c.shared || resigned.Raw != "" {
		// A restart honours the stored TTL, so a changed one is stored
		// first; on a Shared store every renewal is stored, so the other
		// replicas restart their count; a re-signed token is stored
		// before anyone sees it.
		next := d.rec.clone()
		next.Lease.TTLms = ttl
		if resigned.Raw != "" {
			next.Lease.Token = resigned.Raw
		}
		if err := c.commit(ctx, name, d, next); err != nil {
			return protocol.Response{}, fence.Token{}, err
		}
		l = d.rec.Lease
	}
	d.setDeadline(c.clock.Now().Add(msDuration(ttl)))
	return protocol.Response{OK: true, Code: protocol.CodeRenewed, Token: l.Token, Holder: l.Holder, ExpiresInMs: int64(ttl)}, resigned, nil
}

// release ends the lease req.Token names, expired or not, and wakes
// waiting acquires.
func (c *Controller) release(ctx context.Context, name string, req protocol.Request) (protocol.Response, error) {
	tok, d, err := c.lockFor(ctx, name, req)
	if err != nil || d == nil {
		return protocol.Response{Code: protocol.CodeNotHolder}, err
	}
	defer c.done(name, d)
	if !sameLease(d.rec.Lease, tok) {
		return notHolder(d, c.clock.Now()), nil
	}
	next := d.rec.clone()
	next.Lease = nil
	if err := c.commit(ctx, name, d, next); err != nil {
		return protocol.Response{}, err
	}
	d.free()
	return protocol.Response{OK: true, Code: protocol.CodeReleased, Holder: tok.Holder}, nil
}

// get reports name's live lease (CodeHeld), its expired one (CodeExpired)
// or that it is free (CodeReleased); all with OK set.
func (c *Controller) get(ctx context.Context, name string) (protocol.Response, error) {
	d, err := c.lockExisting(ctx, name)
	if err != nil || d == nil {
		return protocol.Response{OK: true, Code: protocol.CodeReleased}, err
	}
	defer c.done(name, d)
	now := c.clock.Now()
	l := d.rec.Lease
	switch {
	case l == nil:
		return protocol.Response{OK: true, Code: protocol.CodeReleased}, nil
	case !d.live(now):
		return protocol.Response{OK: true, Code: protocol.CodeExpired, Token: l.Token, Holder: l.Holder}, nil
	}
	return protocol.Response{OK: true, Code: protocol.CodeHeld, Token: l.Token, Holder: l.Holder, ExpiresInMs: ceilMs(d.remaining(now))}, nil
}

// verify checks req.Token's signature and that it belongs to name and to
// req.Holder if one is given. Errors wrap ErrBadRequest.
func (c *Controller) verify(name string, req protocol.Request) (fence.Token, error) {
	tok, err := c.keys.Verify(req.Token)
	switch {
	case err != nil:
		return fence.Token{}, fmt.Errorf("%w: token: %w", ErrBadRequest, err)
	case tok.Domain != name:
		return fence.Token{}, fmt.Errorf("%w: token is for domain %q, not %q", ErrBadRequest, tok.Domain, name)
	case req.Holder != "" && req.Holder != tok.Holder:
		return fence.Token{}, fmt.Errorf("%w: token is held by %q, not %q", ErrBadRequest, tok.Holder, req.Holder)
	}
	return tok, nil
}

// current reports whether tok is d's live lease; if not, it returns the
// answer: CodeExpired for that lease past its time, CodeNotHolder for a
// released or superseded one. d.mu is held.
func current(d *domain, tok fence.Token, now time.Time) (protocol.Response, bool) {
	l := d.rec.Lease
	switch {
	case !sameLease(l, tok):
		return notHolder(d, now), false
	case !d.live(now):
		return protocol.Response{Code: protocol.CodeExpired, Token: l.Token, Holder: l.Holder}, false
	}
	return protocol.Response{}, true
}

// notHolder answers CodeNotHolder, naming the live holder if there is one.
func notHolder(d *domain, now time.Time) protocol.Response {
	if d.live(now) {
		return protocol.Response{Code: protocol.CodeNotHolder, Holder: d.rec.Lease.Holder, ExpiresInMs: ceilMs(d.remaining(now))}
	}
	return protocol.Response{Code: protocol.CodeNotHolder}
}
