package agent

import "sync"

// queue is a FIFO of at most limit items that holds memory only for the
// items it holds: a slice that grows with the queue and is let go once the
// queue drains, instead of a channel's buffer of limit items reserved (and,
// once cycled, resident) for every device whether it is busy or idle.
//
// push and pop may be called from any goroutines. ready and space carry
// one pending wake-up each: a consumer waits on ready, then pops until pop
// reports empty; a producer blocked by a full queue waits on space.
type queue[T any] struct {
	limit int
	ready chan struct{} // signalled after a push
	space chan struct{} // signalled after a pop

	mu     sync.Mutex // guards items and head
	items  []T        // items[head:] are queued
	head   int
	closed bool // no more pushes (close); pop drains, then reports done
}

func newQueue[T any](limit int) *queue[T] {
	return &queue[T]{limit: limit, ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

// tryPush appends v unless the queue holds limit items or is closed; it
// never blocks.
func (q *queue[T]) tryPush(v T) bool {
	q.mu.Lock()
	if q.closed || len(q.items)-q.head >= q.limit {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, v)
	q.mu.Unlock()
	wake(q.ready)
	return true
}

// push appends v, waiting while the queue is full (back-pressure for a
// single producer). It returns false, without appending, if the queue is
// closed.
func (q *queue[T]) push(v T) bool {
	for {
		q.mu.Lock()
		closed, full := q.closed, len(q.items)-q.head >= q.limit
		q.mu.Unlock()
		if closed {
			return false
		}
		if !full && q.tryPush(v) {
			return true
		}
		<-q.space
	}
}

// pop removes the oldest item; ok is false if the queue is empty.
func (q *queue[T]) pop() (v T, ok bool) {
	q.mu.Lock()
	if q.head == len(q.items) {
		q.mu.Unlock()
		return v, false
	}
	var zero T
	v, q.items[q.head] = q.items[q.head], zero
	q.head++
	if q.head == len(q.items) { // drained: let the slice go
		q.items, q.head = nil, 0
	}
	q.mu.Unlock()
	wake(q.space)
	return v, true
}

// len returns the number of queued items.
func (q *queue[T]) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) - q.head
}

// close refuses further pushes and wakes the consumer, which drains what
// is queued.
func (q *queue[T]) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	wake(q.ready)
}

// done reports whether the queue is closed and empty.
func (q *queue[T]) done() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed && q.head == len(q.items)
}

// wake leaves one wake-up in c (cap 1) unless one is pending.
func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
