package lease

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// domain is the controller's view of one fencing domain. It stays in
// memory while an operation holds a reference to it (refs) and, after the
// last one, only while it has a live lease: an idle domain is evicted and
// read back from the store when next used.
type domain struct {
	// mu serializes the domain's operations and guards the fields below;
	// it is held across the domain's store writes.
	mu       sync.Mutex
	loaded   bool
	rec      Record    // the committed record
	deadline time.Time // when rec.Lease expires, on the controller clock
	// changed is closed (and replaced) when the lease is released or
	// granted and when the head of queue leaves: waiting acquires look
	// again.
	changed chan struct{}
	queue   []uint64 // tickets of the waiting acquires, oldest first
	tickets uint64   // the last ticket handed out

	// until mirrors deadline for ActiveLeases without taking mu, as
	// nanoseconds after base; 0 without a lease.
	until atomic.Int64
	base  time.Time // the controller's start, fixed

	// refs counts the operations holding the domain; guarded by the
	// Controller's mu, not by the domain's. With refs == 0 no one holds
	// mu, so the Controller may read the fields above under its own mu.
	refs int
}

// ref returns name's domain with a reference taken. A domain not in memory
// is created if create is set and otherwise nil is returned. Creating one
// beyond MaxDomains first evicts the idle ones; if none is, it fails with
// ErrBusy.
func (c *Controller) ref(name string, create bool) (*domain, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.domains[name]
	if !ok {
		if !create {
			return nil, nil
		}
		if len(c.domains) >= c.maxDomains && c.sweepLocked() == 0 {
			return nil, fmt.Errorf("%w: %d domains in use (max_domains)", ErrBusy, len(c.domains))
		}
		d = &domain{changed: make(chan struct{}), base: c.started}
		c.domains[name] = d
	}
	d.refs++
	return d, nil
}

// unref drops a reference taken by ref; d.mu must not be held. The last
// reference evicts d if it is idle.
func (c *Controller) unref(name string, d *domain) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d.refs--
	if d.refs == 0 && c.idle(d, c.clock.Now()) {
		delete(c.domains, name)
	}
}

// idle reports whether d, held by no operation, may leave memory: its
// record is in the store and it has no live lease. With a Shared store a
// domain keeps its memory while its record names a lease, even an expired
// one: reading the record again would count that lease from the new read.
// c.mu is held.
func (c *Controller) idle(d *domain, now time.Time) bool {
	if !d.loaded {
		return true
	}
	return !d.live(now) && (!c.shared || d.rec.Lease == nil)
}

// sweepLocked evicts every idle domain no operation holds and returns how
// many it evicted; c.mu is held.
func (c *Controller) sweepLocked() int {
	now := c.clock.Now()
	n := 0
	for name, d := range c.domains {
		if d.refs == 0 && c.idle(d, now) {
			delete(c.domains, name)
			n++
		}
	}
	return n
}

// lockLoaded locks d (referenced by the caller) and loads its record on
// first use. A lease found in the store runs for its full TTL from the
// controller's start. On error d is unlocked.
func (c *Controller) lockLoaded(ctx context.Context, name string, d *domain) error {
	d.mu.Lock()
	if d.loaded && !c.shared {
		return nil
	}
	rec, err := c.store.Load(ctx, name)
	if err != nil {
		d.mu.Unlock()
		return fmt.Errorf("load %s: %w", name, err)
	}
	if c.shared {
		c.observe(d, rec)
		return nil
	}
	d.loaded = true
	d.rec = rec
	if rec.Lease != nil {
		d.setDeadline(c.started.Add(msDuration(rec.Lease.TTLms)))
	}
	return nil
}

// lockExisting references and locks name's domain if the controller or the
// store knows it, for an operation that only reads or changes an existing
// lease. A domain neither knows comes back nil, and nothing is created in
// memory or in the store. The caller ends with c.done.
func (c *Controller) lockExisting(ctx context.Context, name string) (*domain, error) {
	d, _ := c.ref(name, false)
	if d == nil {
		rec, err := c.store.Load(ctx, name)
		if err != nil || rec.Version == 0 {
			return nil, err
		}
		if d, err = c.ref(name, true); err != nil {
			return nil, err
		}
	}
	if err := c.lockLoaded(ctx, name, d); err != nil {
		c.unref(name, d)
		return nil, err
	}
	return d, nil
}

// done unlocks d and drops the caller's reference.
func (c *Controller) done(name string, d *domain) {
	d.mu.Unlock()
	c.unref(name, d)
}

// observe takes rec, just read from a Shared store, as d's record; d.mu is
// held. A record version not seen before starts its lease's full TTL now:
// it was written before this read, so no holder expects it to last longer.
// A version already seen keeps its count. A lease gone (released on another
// replica) wakes the waiting acquires.
func (c *Controller) observe(d *domain, rec Record) {
	d.loaded = true
	if rec.Version == d.rec.Version {
		return
	}
	d.rec = rec
	switch {
	case rec.Lease != nil:
		d.setDeadline(c.clock.Now().Add(msDuration(rec.Lease.TTLms)))
	case d.until.Load() != 0:
		d.free()
	}
}

// commit writes next as d's record; d.mu must be held. On success d.rec is
// the stored record. On a conflict d is marked for reload.
func (c *Controller) commit(ctx context.Context, name string, d *domain, next Record) error {
	stored, err := c.store.Put(ctx, name, next)
	if err != nil {
		d.loaded = false
		return fmt.Errorf("put %s: %w", name, err)
	}
	d.rec = stored
	return nil
}

// live reports whether d has an unexpired lease at now; d.mu must be held.
func (d *domain) live(now time.Time) bool {
	return d.rec.Lease != nil && now.Before(d.deadline)
}

// liveAt is live without d.mu, from the mirrored deadline.
func (d *domain) liveAt(now time.Time) bool {
	u := d.until.Load()
	return u != 0 && int64(now.Sub(d.base)) < u
}

// remaining is the time left on d's lease at now; d.mu must be held.
func (d *domain) remaining(now time.Time) time.Duration {
	return max(d.deadline.Sub(now), 0)
}

func (d *domain) setDeadline(t time.Time) {
	d.deadline = t
	d.until.Store(max(int64(t.Sub(d.base)), 1))
}

// free drops d's lease from memory and wakes waiting acquires; d.mu must be
// held.
func (d *domain) free() {
	d.deadline = time.Time{}
	d.until.Store(0)
	d.wake()
}

// wake makes the waiting acquires look again; d.mu must be held.
func (d *domain) wake() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// enqueue adds a waiting acquire at the end of the queue and returns its
// ticket; d.mu must be held.
func (d *domain) enqueue() uint64 {
	d.tickets++
	d.queue = append(d.queue, d.tickets)
	return d.tickets
}

// dequeue removes ticket from the queue, waking the others if it was at
// the head; d.mu must be held.
func (d *domain) dequeue(ticket uint64) {
	for i, q := range d.queue {
		if q == ticket {
			d.queue = append(d.queue[:i], d.queue[i+1:]...)
			if i == 0 {
				d.wake()
			}
			return
		}
	}
}

// first reports whether an acquire with ticket (0: not queued) may take a
// free domain: no one waits, or it is the oldest waiter. d.mu must be held.
func (d *domain) first(ticket uint64) bool {
	return len(d.queue) == 0 || d.queue[0] == ticket
}

func msDuration(ms uint64) time.Duration { return time.Duration(ms) * time.Millisecond }

// ceilMs rounds d up to whole milliseconds: what other holders are told to
// wait is never shorter than the controller's view.
func ceilMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// floorMs rounds d down to whole milliseconds: what a holder is told it has
// is never longer than the controller's view.
func floorMs(d time.Duration) int64 { return int64(d / time.Millisecond) }
