// Package groupcommit is the single-writer group-commit engine over bbolt:
// one goroutine drains every queued write into one transaction and makes it
// durable as soon as it is idle (no timer); a failed commit stops it for
// good. persist (the agent's fence store) and lease/boltstore (the
// controller's) write through it.
//
// Unlogged, each batch is one bbolt commit. Logged (CommitterOptions.Log),
// a batch is durable once its writes are appended to a write-ahead log and
// fdatasynced; the batches accumulate in one open bbolt transaction, which
// every read sees, and a checkpoint commits it when the log is full, at
// Snapshot and at Close (see Log).
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// DefaultMaxBatch bounds how many queued operations one transaction takes.
const DefaultMaxBatch = 4096

// Errors of the Committer; test with errors.Is.
var (
	// ErrFailed: a commit failed earlier; the committer accepts nothing more.
	// The first failure's cause is wrapped too.
	ErrFailed = errors.New("groupcommit: store failed")
	// ErrClosed: the committer has been closed.
	ErrClosed = errors.New("groupcommit: store closed")
)

// WriteFunc is one write operation run by a Committer inside a batch's
// read-write transaction, in queue order, seeing the writes of the
// operations before it. It reports whether it wrote anything. An error is a
// storage failure: it aborts the whole batch and fails the Committer.
// Logical outcomes (stale, duplicate, …) are results the closure captures,
// never errors.
type WriteFunc func(tx *Tx) (wrote bool, err error)

// CommitterOptions tune a Committer. The zero value means defaults.
type CommitterOptions struct {
	// BeforeCommit, if set, is called by the writer goroutine just before
	// each commit; an error from it is treated as a failed commit. A test
	// seam for storage failures.
	BeforeCommit func() error
	// MaxBatch bounds the operations applied in one transaction. Default
	// DefaultMaxBatch.
	MaxBatch int
	// OnCommit, if set, is called by the writer goroutine after each
	// successful commit (the fsync has returned) and before any caller whose
	// operation was in it is released, with the number of operations and the
	// time the batch took. It must not call the Committer.
	OnCommit func(ops int, took time.Duration)
	// AfterBatch, if set, runs in each batch's transaction after its
	// operations, with the keys they were submitted under (duplicates
	// removed, empty keys left out): housekeeping such as pruning. It reports
	// whether it wrote; an error fails the Committer like a WriteFunc's.
	AfterBatch func(tx *Tx, keys []string) (wrote bool, err error)
	// Log, if set, makes the Committer logged: see the package doc. The
	// Committer owns it from then on and closes it in Close.
	Log *Log
	// OnDurable, if set (logged Committers only), is called by the writer
	// goroutine for every write of a batch, in order, once the batch is
	// durable and before any caller whose operation was in it is released:
	// a cache of durable state (the fence store's domain fences) follows
	// it. value is nil for a delete, and both slices are valid only during
	// the call. A bucket's creation is not reported. It must not call the
	// Committer.
	OnDurable func(bucket, key, value []byte)
}

// Committer is a group-commit writer for one bbolt file: one goroutine takes
// every queued operation, applies them all in one read-write transaction and
// commits as soon as the queue is empty — no timer, so a lone writer pays one
// fsync and concurrent writers share one. A batch that wrote nothing is
// rolled back and costs no fsync. A failed commit is fail-stop: every later
// call returns an error wrapping ErrFailed. Methods are safe for concurrent use.
type Committer struct {
	db   *bolt.DB
	opts CommitterOptions

	mu     sync.RWMutex // guards closed; held for reading while submitting
	closed bool

	queue      chan *request
	writerDone chan struct{}

	failMu  sync.Mutex // guards failErr
	failErr error      // first storage error, wrapping ErrFailed

	// Logged mode only: the open transaction holding every durable batch
	// not yet checkpointed. curMu is held while a batch is applied and
	// until its record is synced, so a read never sees a write that is
	// not durable.
	curMu sync.Mutex
	cur   *bolt.Tx
	rec   recorder
}

type request struct {
	apply WriteFunc
	key   string
	done  chan error // buffered; receives exactly one value
}

// NewCommitter starts the writer goroutine for db. Close stops it; the
// caller closes db after that.
func NewCommitter(db *bolt.DB, opts CommitterOptions) (*Committer, error) {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	c := &Committer{db: db, opts: opts, queue: make(chan *request, opts.MaxBatch), writerDone: make(chan struct{})}
	if opts.Log != nil {
		tx, err := db.Begin(true)
		if err != nil {
			return nil, fmt.Errorf("begin: %w", err)
		}
		c.cur = tx
	}
	go c.run()
	return c, nil
}

// Submit queues fn under key (handed to AfterBatch; may be empty) and waits
// until the batch holding it has committed or failed. ctx bounds only the
// wait for room in the queue: once queued, fn runs and Submit waits for its
// commit, which is bounded by the disk, so a caller never mistakes a durable
// write for a failed one.
func (c *Committer) Submit(ctx context.Context, key string, fn WriteFunc) error {
	req := &request{apply: fn, key: key, done: make(chan error, 1)}
	if err := c.enqueue(ctx, req); err != nil {
		return err
	}
	return <-req.done
}

func (c *Committer) enqueue(ctx context.Context, req *request) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if err := c.usable(); err != nil {
		return err
	}
	select {
	case c.queue <- req:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("persist: queue: %w", ctx.Err())
	}
}

// View runs fn in a read-only view that sees every durable batch and
// nothing else, unless the Committer is closed or failed. Logged, views run
// one at a time, between batches.
func (c *Committer) View(fn func(tx *Tx) error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if err := c.usable(); err != nil {
		return err
	}
	if c.opts.Log == nil {
		return c.db.View(func(tx *bolt.Tx) error { return fn(Wrap(tx)) })
	}
	c.curMu.Lock()
	defer c.curMu.Unlock()
	if err := c.Err(); err != nil {
		return err
	}
	return fn(&Tx{tx: c.cur, readOnly: true})
}

// Snapshot runs fn in a bbolt read-only transaction that holds every batch
// durable when Snapshot was called (for a backup: the bbolt file alone, no
// log). Logged, it checkpoints first; the batches that follow are not in
// fn's transaction but still go on while fn runs.
func (c *Committer) Snapshot(fn func(tx *bolt.Tx) error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if err := c.usable(); err != nil {
		return err
	}
	if c.opts.Log == nil {
		return c.db.View(fn)
	}
	tx, err := c.checkpointAndRead()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}

// checkpointAndRead checkpoints and begins a read transaction before any
// later batch is logged: the copy it reads carries the generation of the
// records that follow it and is the state they apply to.
func (c *Committer) checkpointAndRead() (*bolt.Tx, error) {
	c.curMu.Lock()
	defer c.curMu.Unlock()
	if err := c.Err(); err != nil {
		return nil, err
	}
	if err := c.checkpoint(); err != nil {
		return nil, c.fail(err)
	}
	return c.db.Begin(false)
}

// Close stops taking operations, waits until every queued one has committed
// and its caller is released, and stops the writer; logged, it then
// checkpoints (unless the Committer has failed) and closes the log, and
// returns the checkpoint's error, if any: the log keeps those batches for
// the next open. It does not close the database. Calling Close again
// returns ErrClosed.
func (c *Committer) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closed = true
	close(c.queue) // no sender is inside enqueue: they hold mu for reading
	c.mu.Unlock()
	<-c.writerDone
	if c.opts.Log == nil {
		return nil
	}
	return c.closeLogged()
}

// closeLogged checkpoints the open transaction (unless the Committer has
// failed: then the log keeps what the file lacks) and closes the log.
func (c *Committer) closeLogged() error {
	c.curMu.Lock()
	defer c.curMu.Unlock()
	var err error
	if c.Err() == nil {
		err = c.checkpoint()
	}
	if c.cur != nil {
		err = errors.Join(err, rollback(c.cur))
		c.cur = nil
	}
	return errors.Join(err, c.opts.Log.Close())
}

// Usable returns ErrClosed once the Committer is closed, the error
// wrapping ErrFailed once it has failed, and nil before: what View would
// refuse with, for a caller that reads a cache OnDurable keeps instead.
func (c *Committer) Usable() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.usable()
}

// usable is Usable with mu held.
func (c *Committer) usable() error {
	if c.closed {
		return ErrClosed
	}
	return c.Err()
}

// Err returns nil, or the error wrapping ErrFailed if a commit has failed.
func (c *Committer) Err() error {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	return c.failErr
}

func (c *Committer) fail(cause error) error {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	if c.failErr == nil {
		c.failErr = fmt.Errorf("%w: %w", ErrFailed, cause)
	}
	return c.failErr
}

// run is the writer goroutine. It exits when the queue is closed and drained.
func (c *Committer) run() {
	defer close(c.writerDone)
	batch := make([]*request, 0, c.opts.MaxBatch)
	for first := range c.queue {
		c.letSubmittersIn()
		batch = c.collect(append(batch[:0], first))
		err := c.commit(batch)
		for _, r := range batch {
			r.done <- err
		}
		clear(batch)
	}
}

// maxYields bounds how often the writer yields before one batch.
const maxYields = 4

// letSubmittersIn yields the processor while the queue keeps growing, at
// most maxYields times, before a batch is collected. When the CPU is
// saturated, goroutines already runnable — about to submit — run first and
// join this batch instead of each costing a commit (an fdatasync's CPU)
// of its own: with 100 commands in flight on 2 cores the agent's batches
// grew from 4 to 16 operations and its throughput by a quarter
// (docs/benchmarks.md). When nothing else is runnable, Gosched returns at
// once: a lone writer waits for nothing, and there is still no timer. A
// yield lasts while the scheduler runs other goroutines before it takes
// the writer back from its global run queue: a delay, bounded by the four
// yields, never a wait for something that may not come.
func (c *Committer) letSubmittersIn() {
	for seen, i := -1, 0; i < maxYields && len(c.queue) > seen && len(c.queue) < c.opts.MaxBatch; i++ {
		seen = len(c.queue)
		runtime.Gosched()
	}
}

// collect appends every request already queued, up to MaxBatch, without
// waiting for more.
func (c *Committer) collect(batch []*request) []*request {
	for len(batch) < c.opts.MaxBatch {
		select {
		case r, ok := <-c.queue:
			if !ok {
				return batch
			}
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

func (c *Committer) commit(batch []*request) error {
	if err := c.Err(); err != nil {
		return err
	}
	start := time.Now()
	apply := c.applyBatch
	if c.opts.Log != nil {
		apply = c.applyLogged
	}
	wrote, err := apply(batch)
	if err != nil {
		return c.fail(err)
	}
	if wrote && c.opts.OnCommit != nil {
		c.opts.OnCommit(len(batch), time.Since(start))
	}
	return nil
}

func (c *Committer) applyBatch(batch []*request) (wrote bool, err error) {
	tx, err := c.db.Begin(true)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if !wrote || err != nil {
			err = errors.Join(err, rollback(tx))
		}
	}()
	if wrote, err = c.runBatch(&Tx{tx: tx}, batch); !wrote || err != nil {
		return false, err
	}
	if err := c.beforeCommit(); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return true, nil
}

// runBatch applies the batch's operations and AfterBatch to tx.
func (c *Committer) runBatch(tx *Tx, batch []*request) (wrote bool, err error) {
	for _, r := range batch {
		w, err := r.apply(tx)
		if err != nil {
			return false, err
		}
		wrote = wrote || w
	}
	if c.opts.AfterBatch != nil {
		w, err := c.opts.AfterBatch(tx, batchKeys(batch))
		if err != nil {
			return false, err
		}
		wrote = wrote || w
	}
	return wrote, nil
}

func (c *Committer) beforeCommit() error {
	if c.opts.BeforeCommit == nil {
		return nil
	}
	return c.opts.BeforeCommit()
}

// applyLogged applies the batch to the open transaction and logs its
// writes; when the log is full it checkpoints instead, which makes the
// batch durable in the bbolt file. Any error leaves the open transaction
// holding writes that are not durable, so the caller fails the Committer
// for good: the next open replays the log, which has every batch
// acknowledged.
func (c *Committer) applyLogged(batch []*request) (wrote bool, err error) {
	c.curMu.Lock()
	defer c.curMu.Unlock()
	if err := c.Err(); err != nil { // a checkpoint failed while this batch waited for curMu: no open transaction
		return false, err
	}
	wrote, err = c.logBatch(batch)
	if err != nil {
		return false, c.fail(err) // before curMu is released: no view may see the batch
	}
	return wrote, nil
}

func (c *Committer) logBatch(batch []*request) (wrote bool, err error) {
	c.rec.reset()
	if _, err := c.runBatch(&Tx{tx: c.cur, rec: &c.rec}, batch); err != nil || c.rec.writes == 0 {
		return false, err
	}
	if err := c.beforeCommit(); err != nil {
		return false, err
	}
	err = c.opts.Log.append(c.rec.buf, !c.db.NoSync)
	if errors.Is(err, errLogFull) {
		err = c.checkpoint()
	}
	if err != nil {
		return false, err
	}
	if c.opts.OnDurable != nil {
		c.rec.each(c.opts.OnDurable)
	}
	return true, nil
}

// checkpoint commits the open transaction with the log's next generation
// and opens a new one; curMu is held. After a failure the Committer must be
// failed (the open transaction is gone).
func (c *Committer) checkpoint() error {
	if err := c.opts.Log.putNextGeneration(c.cur); err != nil {
		return err
	}
	err := c.cur.Commit()
	c.cur = nil
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	c.opts.Log.checkpointed()
	if c.cur, err = c.db.Begin(true); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	return nil
}

func rollback(tx *bolt.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, bolterrors.ErrTxClosed) {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

func batchKeys(batch []*request) []string {
	var keys []string
	seen := make(map[string]struct{}, 8)
	for _, r := range batch {
		if _, dup := seen[r.key]; r.key == "" || dup {
			continue
		}
		seen[r.key] = struct{}{}
		keys = append(keys, r.key)
	}
	return keys
}
