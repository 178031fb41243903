package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
)

// worker runs one supervisor's steps through the SDK and records every
// lease call and command.
type worker struct {
	plan Plan
	me   SupervisorPlan
	c    *supervisor.Client
	rec  *history.Writer
	r    *rand.Rand

	mu       sync.Mutex
	kept     map[string]*supervisor.Lease // leases kept between steps, by domain
	released map[*supervisor.Lease]bool   // leases given back: their end is no loss
	wg       sync.WaitGroup               // commands still in flight
}

// run loops over the steps until ctx is done, then lets go of its leases.
func (w *worker) run(ctx context.Context) {
	defer w.finish()
	for i := 0; ctx.Err() == nil; i++ {
		w.step(ctx, w.me.Steps[i%len(w.me.Steps)])
	}
}

// finish waits for the commands in flight (as long as their deadline),
// records the leases still held and releases them.
func (w *worker) finish() {
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(4*w.plan.TTL + time.Second):
	}
	for d, l := range w.kept {
		w.record(history.Op{Kind: history.Held, Domain: d, Start: history.Now(), End: history.Now(),
			ValidUntil: l.ValidUntil().UnixNano()}, l)
		w.release(context.Background(), l)
	}
}

func (w *worker) step(ctx context.Context, st Step) {
	pick := rand.New(rand.NewPCG(st.Pick, 7))
	switch st.Kind {
	case StepWork:
		w.work(ctx, st, pick)
	case StepPipeline:
		w.pipeline(ctx, st, pick)
	case StepStale:
		w.stale(ctx, st, pick)
	case StepBurst:
		w.burst(ctx, st, pick)
	case StepPause:
		sleep(ctx, st.Sleep)
	}
}

// lease returns the kept lease of domain if it is still good, else acquires one.
func (w *worker) lease(ctx context.Context, domain string, wait time.Duration) *supervisor.Lease {
	w.mu.Lock()
	l := w.kept[domain]
	delete(w.kept, domain)
	w.mu.Unlock()
	if l != nil && l.Err() == nil && time.Until(l.ValidUntil()) > w.plan.TTL/4 {
		return l
	}
	if l != nil && l.Err() == nil {
		w.release(ctx, l) // too little left to use: give it back, recorded, before acquiring anew
	}
	return w.acquire(ctx, domain, wait)
}

func (w *worker) keep(domain string, l *supervisor.Lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.kept[domain] = l
}

// acquire acquires domain through the SDK (with renewals) and records it,
// and the lease's loss when it comes.
func (w *worker) acquire(ctx context.Context, domain string, wait time.Duration) *supervisor.Lease {
	op := history.Op{Kind: history.Acquire, Domain: domain, Start: history.Now()}
	actx, cancel := context.WithTimeout(ctx, wait+3*w.plan.TTL)
	defer cancel()
	l, err := w.c.Acquire(actx, domain, supervisor.AcquireOptions{TTL: w.plan.TTL, Wait: wait})
	op.Code, op.Err = leaseOutcome(err)
	if op.Code != "" {
		op.End = history.Now()
	}
	if l == nil {
		w.record(op, nil)
		return nil
	}
	w.record(op, l)
	go w.watchLoss(domain, l)
	return l
}

// watchLoss records the lease's loss, unless it was released.
func (w *worker) watchLoss(domain string, l *supervisor.Lease) {
	<-l.Done()
	w.mu.Lock()
	released := w.released[l]
	w.mu.Unlock()
	if released {
		return
	}
	now := history.Now()
	w.record(history.Op{Kind: history.Lost, Domain: domain, Start: now, End: now,
		ValidUntil: min(l.ValidUntil().UnixNano(), now), Err: fmt.Sprint(l.Err())}, l)
}

func (w *worker) release(ctx context.Context, l *supervisor.Lease) {
	w.mu.Lock()
	w.released[l] = true
	w.mu.Unlock()
	op := history.Op{Kind: history.Release, Domain: l.Domain(), Start: history.Now(), ValidUntil: l.ValidUntil().UnixNano()}
	rctx, cancel := context.WithTimeout(ctx, 3*w.plan.TTL)
	defer cancel()
	err := l.Release(rctx)
	switch {
	case err == nil:
		op.Code = string(protocol.CodeReleased)
	case errors.Is(err, supervisor.ErrLeaseLost):
		op.Code = string(protocol.CodeNotHolder)
	default:
		op.Code, op.Err = leaseOutcome(err)
	}
	if op.Code != "" {
		op.End = history.Now()
	}
	w.record(op, l)
}

// leaseOutcome maps an SDK error to the code it stands for; "" when no
// answer came (the outcome is unknown).
func leaseOutcome(err error) (code, msg string) {
	switch {
	case err == nil:
		return string(protocol.CodeGranted), ""
	case errors.Is(err, supervisor.ErrHeld):
		return string(protocol.CodeHeld), err.Error()
	case errors.Is(err, supervisor.ErrBusy):
		return string(protocol.CodeBusy), err.Error()
	case errors.Is(err, supervisor.ErrBadRequest):
		return string(protocol.CodeBadRequest), err.Error()
	case errors.Is(err, supervisor.ErrLeaseLost):
		return string(protocol.CodeExpired), err.Error()
	case errors.Is(err, supervisor.ErrNoAnswer):
		return "", err.Error()
	}
	return string(protocol.CodeInternal), err.Error()
}

// record stamps op with this supervisor and l's token and writes it.
func (w *worker) record(op history.Op, l *supervisor.Lease) {
	op.Proc = w.me.Name
	if l != nil {
		t := l.Fence()
		op.Epoch, op.Seq, op.Holder = t.Epoch, t.Seq, t.Holder
	}
	if err := w.rec.Write(op); err != nil {
		panic(err) // the history is the point of the run
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
