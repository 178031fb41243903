package lease

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// domain is the controller's view of one fencing domain.
type domain struct {
	// mu serializes the domain's operations and guards the fields below;
	// it is held across the domain's store writes.
	mu       sync.Mutex
	loaded   bool
	rec      Record    // the committed record
	deadline time.Time // when rec.Lease expires, on the controller clock
	freed    chan struct{}

	// until mirrors deadline for ActiveLeases without taking mu, as
	// nanoseconds after base; 0 without a lease.
	until atomic.Int64
	base  time.Time // the controller's start, fixed
}

// domain returns the state of name, creating it on first use.
func (c *Controller) domain(name string) *domain {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.domains[name]
	if !ok {
		d = &domain{freed: make(chan struct{}), base: c.started}
		c.domains[name] = d
	}
	return d
}

// lock locks d and loads its record on first use. A lease found in the
// store runs for its full TTL from the controller's start. On error d is
// unlocked.
func (c *Controller) lock(ctx context.Context, name string) (*domain, error) {
	d := c.domain(name)
	d.mu.Lock()
	if d.loaded && !c.shared {
		return d, nil
	}
	rec, err := c.store.Load(ctx, name)
	if err != nil {
		d.mu.Unlock()
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	if c.shared {
		c.observe(d, rec)
		return d, nil
	}
	d.loaded = true
	d.rec = rec
	if rec.Lease != nil {
		d.setDeadline(c.started.Add(msDuration(rec.Lease.TTLms)))
	}
	return d, nil
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
	close(d.freed)
	d.freed = make(chan struct{})
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
