package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// AcquireOptions tune Acquire.
type AcquireOptions struct {
	// TTL is the lease's time to live, 100 ms … 24 h. Required.
	TTL time.Duration
	// Wait, if set (≤ 60 s), queues for a held domain up to that long.
	Wait time.Duration
}

// Lease is a lease this client holds on one domain, with its token. It
// renews itself until Release, Client.Close, or loss. Methods are safe for
// concurrent use.
type Lease struct {
	c      *Client
	domain string
	token  atomic.Pointer[fence.Token] // decoded, not verified (the agent verifies it); replaced by a re-signed renewal
	ttl    time.Duration

	ctx     context.Context         // cancelled, with Err as its cause, when the lease is lost or released
	cancel  context.CancelCauseFunc // called by loseLocked only
	stopped chan struct{}           // closed when the keepalive goroutine ended (or never started)

	mu         sync.Mutex // guards err, validUntil and expiry
	err        error
	validUntil time.Time   // no later than (send time of the last confirmed grant or renewal) + TTL
	expiry     *time.Timer // fires at validUntil (re-arms itself if a renewal moved it); stopped on loss
}

// Acquire asks the controller for a lease on domain. It returns ErrHeld
// (wrapped with the holder and remaining time) if another holder has it
// and Wait ran out, and a lease otherwise. The request is resent with the
// same request id until the controller answers or ctx ends (ErrNoAnswer):
// the controller treats a resent request as the same acquisition.
func (c *Client) Acquire(ctx context.Context, domain string, o AcquireOptions) (*Lease, error) {
	if err := fence.CheckID("domain", domain); err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	if err := protocol.CheckTTL(uint64(o.TTL.Milliseconds())); err != nil || o.Wait < 0 || o.Wait > protocol.MaxWait {
		return nil, fmt.Errorf("%w: ttl %v must be 100ms..24h and wait %v 0..60s", ErrBadRequest, o.TTL, o.Wait)
	}
	req := protocol.Request{RequestID: randomID()[:20], Holder: c.cfg.Holder,
		TTLms: uint64(o.TTL.Milliseconds()), WaitMs: uint64(o.Wait.Milliseconds())}
	sent := time.Now()
	resp, err := c.leaseCall(ctx, domain, protocol.OpAcquire, req, o.Wait+c.cfg.RetryInterval)
	if err != nil {
		return nil, err
	}
	switch resp.Code {
	case protocol.CodeGranted:
		// The controller's TTL runs from after the grant, which came after
		// the request waited resp.WaitedMs in its queue.
		return c.newLease(domain, resp.Token, o.TTL, sent.Add(time.Duration(resp.WaitedMs)*time.Millisecond))
	case protocol.CodeHeld:
		return nil, fmt.Errorf("%w: %s holds %s for %d ms more", ErrHeld, resp.Holder, domain, resp.ExpiresInMs)
	}
	return nil, leaseError(resp)
}

func (c *Client) newLease(domain, raw string, ttl time.Duration, sent time.Time) (*Lease, error) {
	tok, err := fence.ParseUnverified(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: granted token: %w", ErrInternal, err)
	}
	l := &Lease{c: c, domain: domain, ttl: ttl, validUntil: sent.Add(ttl), stopped: make(chan struct{})}
	l.token.Store(&tok)
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	l.mu.Lock()
	l.expiry = time.AfterFunc(time.Until(l.validUntil), l.expire)
	l.mu.Unlock()
	c.startKeepalive(l)
	return l, nil
}

// leaseCall sends one lease request and returns the controller's response.
func (c *Client) leaseCall(ctx context.Context, domain string, op protocol.LeaseOp, req protocol.Request, minWait time.Duration) (protocol.Response, error) {
	req.ReplyTo = c.reply
	if req.RequestID == "" {
		req.RequestID = randomID()[:20]
	}
	payload, err := json.Marshal(req)
	if err != nil {
		return protocol.Response{}, err
	}
	reply, err := c.exchange(ctx, req.RequestID, c.topics.Lease(domain, string(op)), payload, minWait,
		func([]byte) bool { return true })
	if err != nil {
		return protocol.Response{}, fmt.Errorf("%w: %s %s: %w", ErrNoAnswer, op, domain, err)
	}
	var resp protocol.Response
	if err := json.Unmarshal(reply, &resp); err != nil {
		return protocol.Response{}, fmt.Errorf("%w: undecodable %s response: %w", ErrInternal, op, err)
	}
	return resp, nil
}

func leaseError(resp protocol.Response) error {
	switch resp.Code {
	case protocol.CodeBadRequest:
		return fmt.Errorf("%w: %s", ErrBadRequest, resp.Message)
	case protocol.CodeExpired, protocol.CodeNotHolder:
		return fmt.Errorf("%w: controller says %s", ErrLeaseLost, resp.Code)
	case protocol.CodeBusy:
		return fmt.Errorf("%w: controller says %s", ErrBusy, resp.Message)
	}
	return fmt.Errorf("%w: controller says %s %s", ErrInternal, resp.Code, resp.Message)
}

// Token is the lease's token in wire form, to put in commands.
// After a key rotation a renewal may replace it with the same lease
// re-signed by the controller's new key.
func (l *Lease) Token() string { return l.token.Load().Raw }

// Fence is the lease's decoded token.
func (l *Lease) Fence() fence.Token { return *l.token.Load() }

// Domain is the lease's fencing domain.
func (l *Lease) Domain() string { return l.domain }

// Done is closed when the lease is lost or released; without a confirmed
// renewal it closes when ValidUntil passes (a timer armed at ValidUntil),
// not at the renewal loop's next turn.
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Err is nil while the lease is held and afterwards an error wrapping
// ErrLeaseLost that says why.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// ValidUntil is the latest time this client can be sure the lease is held
// (on its own clock; the controller's TTL runs from when it received the
// request, later than this client sent it).
func (l *Lease) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// lose marks the lease lost with reason; the first reason wins.
func (l *Lease) lose(reason error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loseLocked(reason)
}

func (l *Lease) loseLocked(reason error) {
	if l.err == nil {
		l.err = fmt.Errorf("%w: %w", ErrLeaseLost, reason)
		l.expiry.Stop()
		l.cancel(l.err)
	}
}

// expire runs on the expiry timer, at validUntil: the lease is lost unless
// a renewal confirmed meanwhile moved validity on (then it waits again).
// So Done closes when ValidUntil passes, whatever the renewal loop is doing.
func (l *Lease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if left := time.Until(l.validUntil); left > 0 {
		if l.err == nil {
			l.expiry.Reset(left)
		}
		return
	}
	l.loseLocked(errors.New("no renewal confirmed within the TTL"))
}

// confirm extends validity after a renewal that was sent at sent, unless
// the lease was lost meanwhile (it is never resurrected).
func (l *Lease) confirm(sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil && sent.Add(l.ttl).After(l.validUntil) {
		l.validUntil = sent.Add(l.ttl)
	}
}

// Release gives the lease back so another holder can acquire at once. The
// lease is lost from this call on, whatever the controller answers; the
// release is sent once its keepalive goroutine ended (a renewal in
// flight is abandoned at once), so none is sent after it.
func (l *Lease) Release(ctx context.Context) error {
	l.lose(errors.New("released"))
	<-l.stopped
	resp, err := l.c.leaseCall(ctx, l.domain, protocol.OpRelease, protocol.Request{Token: l.Token()}, 0)
	if err != nil {
		return err
	}
	if resp.Code != protocol.CodeReleased {
		return leaseError(resp)
	}
	return nil
}

// Send sends a command with a fresh id under this lease; see SendID.
func (l *Lease) Send(ctx context.Context, device, op string, args any) (protocol.Result, error) {
	return l.SendID(ctx, randomID(), device, op, args)
}

// SendID sends command id under this lease, like Client.SendID, with
// three differences. It refuses (ErrLeaseLost, nothing sent) once the
// lease is lost or released, or its validity has passed. The command's
// deadline_ms is the earlier of ctx's deadline and ValidUntil (as of the
// first send), so the agent answers expired rather than apply it after
// this client stopped being sure of its lease. If the lease is lost while
// it waits, it stops resending at once and returns an error wrapping
// ErrNoResult and ErrLeaseLost. A stale result marks the lease lost: a
// newer holder exists.
func (l *Lease) SendID(ctx context.Context, id, device, op string, args any) (protocol.Result, error) {
	deadline, err := l.sendDeadline(ctx)
	if err != nil {
		return protocol.Result{}, fmt.Errorf("supervisor: %s to %s: %w", op, device, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.ctx, func() { cancel(context.Cause(l.ctx)) })
	defer stop()
	res, err := l.c.sendCommand(ctx, protocol.Command{ID: id, Token: l.Token(), Op: op}, device, args, deadline)
	if cause := context.Cause(ctx); errors.Is(err, context.Canceled) && errors.Is(cause, ErrLeaseLost) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	if res.Code == protocol.CodeStaleToken {
		l.lose(fmt.Errorf("device %s is fenced at a newer lease", device))
	}
	return res, err
}

// sendDeadline is the deadline_ms of a command sent now: the earlier of
// ctx's deadline and ValidUntil; an error wrapping ErrLeaseLost if the
// lease is lost or its validity passed.
func (l *Lease) sendDeadline(ctx context.Context) (time.Time, error) {
	if err := l.Err(); err != nil {
		return time.Time{}, err
	}
	deadline := l.ValidUntil()
	if !time.Now().Before(deadline) {
		return time.Time{}, fmt.Errorf("%w: no renewal confirmed within the TTL", ErrLeaseLost)
	}
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return deadline, nil
}

// LeaseRequest sends one raw lease request (acquire, renew, release, get)
// and returns the controller's response, for tools that manage tokens
// themselves (fencectl). It fills request_id and reply_to; it starts no
// renewals. Prefer Acquire in programs.
func (c *Client) LeaseRequest(ctx context.Context, domain string, op protocol.LeaseOp, req protocol.Request) (protocol.Response, error) {
	if err := fence.CheckID("domain", domain); err != nil {
		return protocol.Response{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	wait := time.Duration(req.WaitMs) * time.Millisecond
	return c.leaseCall(ctx, domain, op, req, wait+c.cfg.RetryInterval)
}
