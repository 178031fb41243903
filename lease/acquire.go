package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// Retention of acquire request ids for idempotent retries: a request is
// remembered while its lease is current, and otherwise for its TTL plus
// RequestSlack after the grant (wall clock), at most MaxRequests per domain
// (oldest dropped first).
const (
	RequestSlack = time.Minute
	MaxRequests  = 256
)

// acquire grants name to req.Holder, waiting up to req.WaitMs while another
// holder has it. Waiting acquires are served first come, first served: a
// free domain goes to the oldest waiter, and a new acquire does not pass
// the queue.
func (c *Controller) acquire(ctx context.Context, name string, req protocol.Request) (protocol.Response, error) {
	d, err := c.ref(name, true)
	if err != nil {
		return protocol.Response{}, err
	}
	defer c.unref(name, d)
	w := &waiter{join: req.WaitMs > 0 && c.takeWaiterSlot()}
	if w.join {
		defer func() { <-c.waiters }()
	}
	start := c.clock.Now()
	resp, changed, err := c.tryAcquire(ctx, name, d, req, w)
	if err != nil || resp.Code != protocol.CodeHeld || !w.join {
		return resp, err
	}
	resp, tried, err := c.wait(ctx, name, d, req, w, resp, changed)
	if err == nil && resp.Code == protocol.CodeGranted {
		// The attempt that granted began tried-start after the request
		// arrived; the lease's TTL runs from after it. A client counting
		// from when it sent, plus this, stays on the safe side.
		resp.WaitedMs = tried.Sub(start).Milliseconds()
	}
	return resp, err
}

// takeWaiterSlot reserves room for one more waiting acquire; false when
// MaxWaiters wait already (the acquire is then answered at once).
func (c *Controller) takeWaiterSlot() bool {
	select {
	case c.waiters <- struct{}{}:
		return true
	default:
		return false
	}
}

// waiter is an acquire's place in its domain's queue.
type waiter struct {
	join   bool   // join the queue when the domain is held
	ticket uint64 // place in the queue; 0: not queued
}

// wait retries a held acquire whenever the domain changes or its lease
// should have expired, until it is granted, req.WaitMs has passed or ctx
// ends; it leaves the queue on return.
func (c *Controller) wait(ctx context.Context, name string, d *domain, req protocol.Request, w *waiter, resp protocol.Response, changed <-chan struct{}) (protocol.Response, time.Time, error) {
	defer c.leave(d, w)
	end := c.clock.Now().Add(msDuration(req.WaitMs))
	var (
		err   error
		tried time.Time // when the last attempt began
	)
	for resp.Code == protocol.CodeHeld {
		left := end.Sub(c.clock.Now())
		if left <= 0 {
			return resp, tried, nil
		}
		select {
		case <-changed:
		case <-c.clock.After(c.nextLook(left, msDuration(uint64(resp.ExpiresInMs)))):
		case <-ctx.Done():
			return resp, tried, nil
		}
		tried = c.clock.Now()
		if resp, changed, err = c.tryAcquire(ctx, name, d, req, w); err != nil {
			return resp, tried, err
		}
	}
	return resp, tried, nil
}

// leave takes w out of d's queue if it is still in it.
func (c *Controller) leave(d *domain, w *waiter) {
	if w.ticket == 0 {
		return
	}
	d.mu.Lock()
	d.dequeue(w.ticket)
	d.mu.Unlock()
	w.ticket = 0
}

// nextLook is how long a waiting acquire sleeps before it tries again: until
// its wait ends or the lease expires (0: no lease to wait for), and with a
// Shared store at most poll.
func (c *Controller) nextLook(left, expires time.Duration) time.Duration {
	if expires > 0 {
		left = min(left, expires)
	}
	if c.poll > 0 {
		return min(left, c.poll)
	}
	return left
}

// tryAcquire makes one attempt on d (referenced by the caller) and returns
// its response and a channel closed when the domain next changes. A held
// answer queues w if it is to join; any other answer takes it out of the
// queue. A new token is handed to OnGrant after the domain is unlocked.
func (c *Controller) tryAcquire(ctx context.Context, name string, d *domain, req protocol.Request, w *waiter) (protocol.Response, <-chan struct{}, error) {
	if err := c.lockLoaded(ctx, name, d); err != nil {
		return protocol.Response{}, nil, err
	}
	resp, tok, err := c.acquireLocked(ctx, name, d, req, w.ticket)
	switch {
	case err == nil && resp.Code == protocol.CodeHeld && w.join && w.ticket == 0:
		w.ticket = d.enqueue()
	case resp.Code != protocol.CodeHeld && w.ticket != 0:
		d.dequeue(w.ticket)
		w.ticket = 0
	}
	changed := d.changed
	d.mu.Unlock()
	if tok.Raw != "" && c.onGrant != nil {
		c.onGrant(tok)
	}
	return resp, changed, err
}

// acquireLocked decides an acquire with queue ticket (0: not queued); d.mu
// is held. tok is set when a new lease was committed.
func (c *Controller) acquireLocked(ctx context.Context, name string, d *domain, req protocol.Request, ticket uint64) (protocol.Response, fence.Token, error) {
	now := c.clock.Now()
	if q, ok := d.rec.findRequest(req.RequestID); ok {
		resp, err := retried(d, q, req, now)
		return resp, fence.Token{}, err
	}
	live := d.live(now)
	switch {
	case live && d.rec.Lease.Holder != req.Holder:
		return protocol.Response{Code: protocol.CodeHeld, Holder: d.rec.Lease.Holder, ExpiresInMs: ceilMs(d.remaining(now))}, fence.Token{}, nil
	case !live && !d.first(ticket):
		return protocol.Response{Code: protocol.CodeHeld, Message: "earlier waiting acquires go first"}, fence.Token{}, nil
	}
	return c.grant(ctx, name, d, req, now)
}

// retried answers a request id seen before: the same grant while it is the
// live lease, CodeExpired once it is not.
func retried(d *domain, q RequestRecord, req protocol.Request, now time.Time) (protocol.Response, error) {
	if q.Holder != req.Holder {
		return protocol.Response{}, fmt.Errorf("%w: request_id %q belongs to holder %q", ErrBadRequest, q.ID, q.Holder)
	}
	if d.live(now) && d.rec.Lease.Seq == q.Seq {
		return protocol.Response{OK: true, Code: protocol.CodeGranted, Token: d.rec.Lease.Token, Holder: q.Holder, ExpiresInMs: floorMs(d.remaining(now))}, nil
	}
	return protocol.Response{Code: protocol.CodeExpired, Holder: q.Holder}, nil
}

// grant mints the domain's next token for req, makes it durable and starts
// its lease; d.mu is held.
func (c *Controller) grant(ctx context.Context, name string, d *domain, req protocol.Request, now time.Time) (protocol.Response, fence.Token, error) {
	if err := c.checkFloor(ctx, name, d.rec.Seq+1); err != nil {
		return protocol.Response{}, fence.Token{}, err
	}
	tok, err := c.signer.Sign(fence.Token{Domain: name, Epoch: c.epoch, Seq: d.rec.Seq + 1, Holder: req.Holder,
		IssuedAt: now.UnixMilli(), TTLms: uint32(req.TTLms)})
	if err != nil {
		return protocol.Response{}, fence.Token{}, fmt.Errorf("grant %s: %w", name, err)
	}
	next := d.rec.clone()
	next.Seq = tok.Seq
	next.Lease = &LeaseRecord{Token: tok.Raw, Epoch: tok.Epoch, Seq: tok.Seq, Holder: req.Holder,
		RequestID: req.RequestID, TTLms: req.TTLms}
	next.Requests = append(next.Requests, RequestRecord{ID: req.RequestID, Holder: req.Holder, Seq: tok.Seq,
		AtMs: now.UnixMilli(), TTLms: req.TTLms})
	next.Requests = pruneRequests(next.Requests, now.UnixMilli(), tok.Seq)
	if err := c.commit(ctx, name, d, next); err != nil {
		return protocol.Response{}, fence.Token{}, err
	}
	// The lease runs from after the commit: the controller never expires it
	// before a holder counting from its own request could.
	d.setDeadline(c.clock.Now().Add(msDuration(req.TTLms)))
	d.wake() // queued waiters learn the new lease's expiry
	resp := protocol.Response{OK: true, Code: protocol.CodeGranted, Token: tok.Raw, Holder: req.Holder, ExpiresInMs: int64(req.TTLms)}
	return resp, tok, nil
}

// pruneRequests drops remembered requests past retention, keeping the one
// of the current lease (seq); it reuses reqs' array.
func pruneRequests(reqs []RequestRecord, nowMs int64, seq uint64) []RequestRecord {
	kept := reqs[:0]
	for _, q := range reqs {
		if q.Seq == seq || nowMs-q.AtMs < int64(q.TTLms)+RequestSlack.Milliseconds() {
			kept = append(kept, q)
		}
	}
	if n := len(kept) - MaxRequests; n > 0 {
		kept = append(kept[:0], kept[n:]...)
	}
	return kept
}
