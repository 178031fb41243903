package persist

import (
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// request is one write operation queued for the writer goroutine.
type request struct {
	// apply runs inside the batch's read-write transaction, in queue order,
	// and sees the writes of the operations before it. It reports whether it
	// wrote anything. An error is a storage failure: it aborts the whole
	// batch and fails the store. Logical outcomes (stale, duplicate, …) are
	// results captured by the closure, not errors.
	apply func(tx *bolt.Tx) (wrote bool, err error)
	// device, if set, is pruned after the batch's operations.
	device string
	done   chan error // buffered; receives exactly one value
}

// submit queues op and waits until the batch holding it has committed (or
// failed). ctx bounds only the wait for room in the queue: once queued, the
// operation runs and submit waits for its commit, which is bounded by the
// disk, so a caller never mistakes a durable write for a failed one.
func (s *Store) submit(ctx context.Context, device string, apply func(tx *bolt.Tx) (bool, error)) error {
	req := &request{apply: apply, device: device, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	if err := s.failure(); err != nil {
		s.mu.RUnlock()
		return err
	}
	select {
	case s.queue <- req:
	case <-ctx.Done():
		s.mu.RUnlock()
		return fmt.Errorf("persist: queue: %w", ctx.Err())
	}
	s.mu.RUnlock()
	return <-req.done
}

// runWriter is the writer goroutine: it takes everything queued, applies it
// in one transaction, commits, then releases the callers. It exits when the
// queue is closed and drained.
func (s *Store) runWriter() {
	defer close(s.writerDone)
	batch := make([]*request, 0, s.opts.MaxBatch)
	for first := range s.queue {
		batch = s.collect(append(batch[:0], first))
		err := s.commit(batch)
		for _, r := range batch {
			r.done <- err
		}
		clear(batch)
	}
}

// collect appends to batch every request already queued, up to MaxBatch,
// without waiting for more.
func (s *Store) collect(batch []*request) []*request {
	for len(batch) < s.opts.MaxBatch {
		select {
		case r, ok := <-s.queue:
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

// commit applies batch in one read-write transaction and commits it if
// anything was written (a batch of pure reads, e.g. stale rejections, is
// rolled back: it costs no fsync). A storage error fails the store.
func (s *Store) commit(batch []*request) error {
	if err := s.failure(); err != nil {
		return err
	}
	start := time.Now()
	wrote, err := s.applyBatch(batch)
	if err != nil {
		return s.fail(err)
	}
	if wrote && s.opts.OnCommit != nil {
		s.opts.OnCommit(len(batch), time.Since(start))
	}
	return nil
}

func (s *Store) applyBatch(batch []*request) (wrote bool, err error) {
	tx, err := s.db.Begin(true)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if !wrote || err != nil {
			err = errors.Join(err, rollback(tx))
		}
	}()
	for _, r := range batch {
		w, err := r.apply(tx)
		if err != nil {
			return false, err
		}
		wrote = wrote || w
	}
	pruned, err := s.pruneBatch(tx, batch)
	if err != nil {
		return false, err
	}
	wrote = wrote || pruned
	if !wrote {
		return false, nil
	}
	if s.testCommitErr != nil {
		if err := s.testCommitErr(); err != nil {
			return false, err
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return true, nil
}

func rollback(tx *bolt.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, bolt.ErrTxClosed) {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

// pruneBatch prunes the journals of the devices the batch touched.
func (s *Store) pruneBatch(tx *bolt.Tx, batch []*request) (bool, error) {
	var pruned bool
	seen := make(map[string]bool, 4)
	for _, r := range batch {
		if r.device == "" || seen[r.device] {
			continue
		}
		seen[r.device] = true
		n, err := s.pruneDevice(tx, r.device)
		if err != nil {
			return false, err
		}
		pruned = pruned || n > 0
	}
	return pruned, nil
}
