package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
)

// work: acquire (the kept lease or a new one), send a few commands one by
// one to the domain's devices (one of them twice with the same id if
// st.Retry), then release or keep the lease.
func (w *worker) work(ctx context.Context, st Step, pick *rand.Rand) {
	l := w.lease(ctx, st.Domain, st.Wait)
	if l == nil {
		return
	}
	for i := range st.Commands {
		dev := w.device(st.Domain, pick)
		op, args := w.drawCommand(pick)
		id := w.newID()
		w.send(ctx, l, id, dev, op, args)
		if st.Retry && i == 0 {
			w.send(ctx, l, id, dev, op, args)
		}
	}
	if st.Release {
		w.release(ctx, l)
		return
	}
	w.keep(st.Domain, l)
}

// pipeline: a pulse longer than the TTL, sets queued behind it on the same
// device, and the lease released at once, so that a waiting acquirer takes
// over while they wait in the agent's queue. They go out under the raw
// token, not the Lease: the SDK would bound the pulse's deadline by the
// lease's validity and stop waiting for their answers at the release.
func (w *worker) pipeline(ctx context.Context, st Step, pick *rand.Rand) {
	l := w.lease(ctx, st.Domain, st.Wait)
	if l == nil {
		return
	}
	tok, dev := l.Fence(), w.device(st.Domain, pick)
	w.asyncRaw(ctx, tok, w.newID(), dev, "pulse", map[string]any{"ms": (w.plan.TTL * 3 / 2).Milliseconds()})
	time.Sleep(10 * time.Millisecond) // let the pulse enter the device first
	for range st.Commands {
		w.asyncRaw(ctx, tok, w.newID(), dev, "set", map[string]any{"value": pick.IntN(1000)})
	}
	time.Sleep(20 * time.Millisecond)
	w.release(ctx, l)
}

// stale: a lease acquired with a raw request (so nothing renews it), a
// command under it, a stall past its TTL, then writes with the old token —
// a holder that woke from a pause. The writes go out marked stale.
func (w *worker) stale(ctx context.Context, st Step, pick *rand.Rand) {
	tok, ok := w.rawAcquire(ctx, st.Domain)
	if !ok {
		return
	}
	dev := w.device(st.Domain, pick)
	w.sendRaw(ctx, tok, w.newID(), dev, "set", map[string]any{"value": pick.IntN(1000)}, false)
	sleep(ctx, st.Sleep)
	for range st.Commands {
		w.sendRaw(ctx, tok, w.newID(), w.device(st.Domain, pick), "set", map[string]any{"value": pick.IntN(1000)}, true)
	}
}

// burst: more commands at once to one device than its queue holds.
func (w *worker) burst(ctx context.Context, st Step, pick *rand.Rand) {
	l := w.lease(ctx, st.Domain, st.Wait)
	if l == nil {
		return
	}
	dev := w.device(st.Domain, pick)
	for range st.Commands {
		w.async(ctx, l, w.newID(), dev, "set", map[string]any{"value": pick.IntN(1000)})
	}
	w.keep(st.Domain, l)
}

// rawAcquire acquires domain with one raw lease request (no renewals) and
// records it, and its end (sent + TTL) as the time it is held until.
func (w *worker) rawAcquire(ctx context.Context, domain string) (fence.Token, bool) {
	op := history.Op{Kind: history.Acquire, Domain: domain, Start: history.Now()}
	rctx, cancel := context.WithTimeout(ctx, 3*w.plan.TTL)
	defer cancel()
	sent := time.Now()
	resp, err := w.c.LeaseRequest(rctx, domain, protocol.OpAcquire,
		protocol.Request{Holder: w.c.Holder(), TTLms: uint64(w.plan.TTL.Milliseconds())})
	if err != nil {
		op.Err = err.Error()
		w.record(op, nil)
		return fence.Token{}, false
	}
	op.End, op.Code = history.Now(), string(resp.Code)
	tok, perr := fence.ParseUnverified(resp.Token)
	if resp.Code != protocol.CodeGranted || perr != nil {
		w.record(op, nil)
		return fence.Token{}, false
	}
	op.Epoch, op.Seq, op.Holder = tok.Epoch, tok.Seq, tok.Holder
	w.record(op, nil)
	valid := sent.Add(time.Duration(resp.WaitedMs) * time.Millisecond).Add(w.plan.TTL).UnixNano()
	w.record(history.Op{Kind: history.Held, Domain: domain, Epoch: tok.Epoch, Seq: tok.Seq, Holder: tok.Holder,
		Start: op.End, End: op.End, ValidUntil: valid}, nil)
	return tok, true
}

// send sends one command under l, records it and returns the answer's
// code ("" without one); nothing is recorded when the SDK refused to send
// (the lease was lost already).
func (w *worker) send(ctx context.Context, l *supervisor.Lease, id, dev, op string, args any) protocol.Code {
	if l.Err() != nil {
		return ""
	}
	rec := w.commandOp(l.Fence(), id, dev, op, args)
	cctx, cancel := w.commandContext(ctx)
	defer cancel()
	rec.Deadline = deadlineOf(cctx, l.ValidUntil()) // as the SDK computes it
	res, err := l.SendID(cctx, id, dev, op, args)
	if res.Code == "" && errors.Is(err, supervisor.ErrLeaseLost) && !errors.Is(err, supervisor.ErrNoResult) {
		return "" // refused before sending
	}
	w.recordResult(rec, res, err)
	return res.Code
}

// async runs send in a goroutine the worker waits for at the end.
func (w *worker) async(ctx context.Context, l *supervisor.Lease, id, dev, op string, args any) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.send(ctx, l, id, dev, op, args)
	}()
}

// asyncRaw runs sendRaw in a goroutine the worker waits for at the end.
func (w *worker) asyncRaw(ctx context.Context, tok fence.Token, id, dev, op string, args any) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.sendRaw(ctx, tok, id, dev, op, args, false)
	}()
}

// sendRaw sends a command under a raw token (no lease object) and records it.
func (w *worker) sendRaw(ctx context.Context, tok fence.Token, id, dev, op string, args any, stale bool) {
	rec := w.commandOp(tok, id, dev, op, args)
	rec.Stale = stale
	cctx, cancel := w.commandContext(ctx)
	defer cancel()
	rec.Deadline = deadlineOf(cctx, time.Time{})
	res, err := w.c.SendID(cctx, id, tok.Raw, dev, op, args)
	w.recordResult(rec, res, err)
}

func (w *worker) commandOp(tok fence.Token, id, dev, op string, args any) history.Op {
	b, _ := json.Marshal(args)
	return history.Op{Kind: history.Command, Domain: tok.Domain, Epoch: tok.Epoch, Seq: tok.Seq, Holder: tok.Holder,
		Device: dev, ID: id, Op: op, Idempotent: op == "get", Args: b, Start: history.Now()}
}

// recordResult completes rec with the answer (or its absence) and writes it.
func (w *worker) recordResult(rec history.Op, res protocol.Result, err error) {
	if res.Code != "" { // busy too: the device only ever answered busy, nothing was accepted
		rec.End, rec.Code = history.Now(), string(res.Code)
	}
	if err != nil {
		rec.Err = err.Error()
	}
	if res.Fence != nil {
		rec.FenceEpoch, rec.FenceSeq = res.Fence.Epoch, res.Fence.Seq
	}
	rec.Proc = w.me.Name
	if werr := w.rec.Write(rec); werr != nil {
		panic(werr)
	}
}

// deadlineOf is the deadline_ms a command sent now under ctx carries: the
// earlier of ctx's deadline and validUntil (if set), in Unix ns.
func deadlineOf(ctx context.Context, validUntil time.Time) int64 {
	d, ok := ctx.Deadline()
	if !validUntil.IsZero() && (!ok || validUntil.Before(d)) {
		d, ok = validUntil, true
	}
	if !ok {
		return 0
	}
	return d.UnixNano()
}

// commandContext bounds one command: 4 TTLs, whatever is left of the
// schedule — a command sent just before the end still gets a deadline it
// can meet (else the agent would give up on it in the driver, in doubt).
func (w *worker) commandContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 4*w.plan.TTL)
}

// device picks a device of domain.
func (w *worker) device(domain string, pick *rand.Rand) string {
	for _, d := range w.plan.Domains {
		if d.Name == domain {
			return d.Devices[pick.IntN(len(d.Devices))].ID
		}
	}
	panic(fmt.Sprintf("chaos: no domain %q in the plan", domain))
}

// drawCommand picks set (mostly) or get.
func (w *worker) drawCommand(pick *rand.Rand) (string, any) {
	if pick.IntN(4) == 0 {
		return "get", nil
	}
	return "set", map[string]any{"value": pick.IntN(1000)}
}

// newID is a fresh command id, unique across the schedule.
func (w *worker) newID() string { return fmt.Sprintf("%s-%d", w.me.Name, w.r.Uint64()) }
