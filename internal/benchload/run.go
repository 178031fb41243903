package benchload

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// Limit says when a run stops. Set exactly one of Ops and Duration.
type Limit struct {
	// Ops is the total number of operations, split as evenly as possible
	// over the devices (the first Ops%devices devices do one more).
	Ops int
	// Duration is how long every device keeps starting operations; an
	// operation in flight at the deadline completes and counts.
	Duration time.Duration
}

func (l Limit) validate() error {
	if (l.Ops > 0) == (l.Duration > 0) || l.Ops < 0 || l.Duration < 0 {
		return fmt.Errorf("%w: limit needs exactly one of Ops (%d) and Duration (%v)", ErrInvalid, l.Ops, l.Duration)
	}
	return nil
}

// Share returns device dev's share of ops operations split over devices.
func Share(ops, devices, dev int) int {
	n := ops / devices
	if dev < ops%devices {
		n++
	}
	return n
}

// Op performs one durable operation: the i-th (from 0) of device dev. Run
// calls it from one goroutine per device, so calls for one device are
// sequential and calls for different devices concurrent. A non-nil error
// stops the run.
type Op func(ctx context.Context, dev, i int) error

// Result is what a run measured.
type Result struct {
	Ops       int             // operations completed
	Elapsed   time.Duration   // from starting the devices until the last stopped
	Latencies []time.Duration // of every completed operation, ascending
}

// Rate returns completed operations per second, 0 if nothing was timed.
func (r Result) Rate() float64 { return PerSecond(int64(r.Ops), r.Elapsed) }

// Percentile returns the latency within which the fraction q (0 < q <= 1)
// of the operations completed, or 0 if there were none.
func (r Result) Percentile(q float64) time.Duration {
	n := len(r.Latencies)
	if n == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(n))) - 1
	return r.Latencies[min(max(i, 0), n-1)]
}

// PerSecond returns n per second of d, or 0 if d is not positive.
func PerSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Run starts one goroutine per device, each calling op until its share of
// lim is done, and returns once all have stopped. The first error from op,
// or the cancellation of ctx, stops every device; Run returns it together
// with what was measured until then.
func Run(ctx context.Context, devices int, lim Limit, op Op) (Result, error) {
	if devices < 1 {
		return Result{}, fmt.Errorf("%w: devices %d", ErrInvalid, devices)
	}
	if err := lim.validate(); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lats := make([][]time.Duration, devices)
	var wg sync.WaitGroup
	start := time.Now()
	for dev := range devices {
		b := bound{ops: math.MaxInt}
		if lim.Ops > 0 {
			b.ops = Share(lim.Ops, devices, dev)
		} else {
			b.deadline = start.Add(lim.Duration)
		}
		wg.Go(func() {
			var err error
			if lats[dev], err = runDevice(ctx, dev, b, op); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	res := Result{Elapsed: time.Since(start), Latencies: slices.Concat(lats...)}
	res.Ops = len(res.Latencies)
	slices.Sort(res.Latencies)
	return res, context.Cause(ctx)
}

// bound is one device's share of a Limit: at most ops operations, none
// started at or after deadline unless it is zero.
type bound struct {
	ops      int
	deadline time.Time
}

func (b bound) reached(i int, now time.Time) bool {
	return i >= b.ops || (!b.deadline.IsZero() && !now.Before(b.deadline))
}

// runDevice calls op for device dev until b is reached or ctx is done, and
// returns the latencies of the calls that succeeded.
func runDevice(ctx context.Context, dev int, b bound, op Op) ([]time.Duration, error) {
	var lats []time.Duration
	if b.deadline.IsZero() {
		lats = make([]time.Duration, 0, b.ops)
	}
	for i := 0; ; i++ {
		t0 := time.Now()
		if ctx.Err() != nil || b.reached(i, t0) {
			return lats, nil
		}
		if err := op(ctx, dev, i); err != nil {
			return lats, fmt.Errorf("device %d operation %d: %w", dev, i, err)
		}
		lats = append(lats, time.Since(t0))
	}
}
