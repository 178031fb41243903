package persist

import (
	"fmt"
	"time"

	"github.com/fencegate/fencegate/internal/groupcommit"
)

// Defaults for Options.
const (
	DefaultLockTimeout = time.Second
	DefaultMaxRecords  = 10000
	DefaultMaxAge      = 24 * time.Hour
	// DefaultMaxBatch bounds how many queued operations one transaction takes.
	DefaultMaxBatch = groupcommit.DefaultMaxBatch
	// pruneBudget bounds the journal records one transaction prunes per
	// device, so pruning never makes a batch of commands wait long.
	pruneBudget = 256
)

// Options tune a Store. The zero value means defaults.
type Options struct {
	// LockTimeout is how long Open waits for the file lock held by another
	// process before failing with ErrLocked. Default 1 s.
	LockTimeout time.Duration
	// MaxRecords is the journal retention per device, in records. Default
	// 10 000. The journal is the dedupe window: a command id pruned from it
	// is treated as new if it comes again.
	MaxRecords int
	// MaxAge is the journal retention per device, in time since acceptance
	// as the store clock counts it: the time the store was open, measured on
	// the monotonic clock (see storeClock). A wall-clock step — a gateway
	// without RTC booting in 1970, then corrected by NTP — never ages a
	// record; time the agent was down does not count either, so the window
	// only ever grows. Default 24 h. Records are pruned when either bound is
	// passed; records still waiting for a result are never pruned.
	MaxAge time.Duration
	// MaxBatch bounds the operations applied in one transaction. Default 4096.
	MaxBatch int
	// Now returns the wall-clock time stamped on records for display
	// (AcceptedAt, DoneAt). Retention never uses it. Default time.Now.
	Now func() time.Time
	// Uptime returns the monotonic time since the store was opened; the
	// store clock advances by it. Default: time.Since(open), monotonic.
	// Tests set it to age records without touching the wall clock.
	Uptime func() time.Duration
	// OnCommit, if set, is called by the writer goroutine after each
	// successful commit (the fsync has returned) and before any caller whose
	// operation was in it is released, with the number of operations in the
	// batch and the time the commit took. It must not call the Store.
	OnCommit func(ops int, took time.Duration)
	// beforeCommit is the in-package tests' storage-failure seam
	// (groupcommit.CommitterOptions.BeforeCommit).
	beforeCommit func() error
}

func (o Options) withDefaults() Options {
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.MaxRecords <= 0 {
		o.MaxRecords = DefaultMaxRecords
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Uptime == nil {
		opened := time.Now()
		o.Uptime = func() time.Duration { return time.Since(opened) }
	}
	return o
}

// Validate reports options that cannot work, naming the field and value.
func (o Options) Validate() error {
	switch {
	case o.LockTimeout < 0:
		return fmt.Errorf("%w: LockTimeout %v is negative", ErrInvalid, o.LockTimeout)
	case o.MaxRecords < 0:
		return fmt.Errorf("%w: MaxRecords %d is negative", ErrInvalid, o.MaxRecords)
	case o.MaxAge < 0:
		return fmt.Errorf("%w: MaxAge %v is negative", ErrInvalid, o.MaxAge)
	case o.MaxBatch < 0:
		return fmt.Errorf("%w: MaxBatch %d is negative", ErrInvalid, o.MaxBatch)
	}
	return nil
}
