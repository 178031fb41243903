package agent

import "sync"

// queue is a FIFO of at most limit items with a worker started on demand.
// It holds memory only for the items it holds — a slice that grows with
// the queue and is let go once the queue drains, instead of a channel's
// buffer of limit items reserved (and, once cycled, resident) for every
// device — and no goroutine while it is empty: the first push into an
// empty queue starts one worker (spawn), which takes items with next until
// the queue is empty and then returns. At most one worker runs at a time,
// so items are handled one by one in push order.
//
// Pushes may come from any goroutines; next only from the worker.
type queue[T any] struct {
	limit int
	spawn func()        // starts a worker goroutine; called with mu held, must not call back
	space chan struct{} // one pending wake-up after a pop, for a blocked push

	mu     sync.Mutex // guards items, head, active and closed
	items  []T        // items[head:] are queued
	head   int
	active bool // a worker is running (always true while items are queued)
	closed bool // no more pushes (close); the worker drains what is queued
}

// pushResult is what a push did.
type pushResult int

const (
	pushed    pushResult = iota
	full                 // the queue holds limit items; nothing done
	closedOut            // the queue is closed; nothing done
)

func newQueue[T any](limit int, spawn func()) *queue[T] {
	return &queue[T]{limit: limit, spawn: spawn, space: make(chan struct{}, 1)}
}

// tryPush appends v unless the queue is full or closed; it never blocks.
func (q *queue[T]) tryPush(v T) pushResult {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed:
		return closedOut
	case len(q.items)-q.head >= q.limit:
		return full
	}
	q.items = append(q.items, v)
	if !q.active {
		q.active = true
		q.spawn()
	}
	return pushed
}

// push appends v, waiting while the queue is full (back-pressure for a
// single producer). It returns false, without appending, if the queue is
// closed.
func (q *queue[T]) push(v T) bool {
	for {
		switch q.tryPush(v) {
		case pushed:
			return true
		case closedOut:
			return false
		}
		<-q.space
	}
}

// next removes the oldest item for the worker. When the queue is empty it
// returns ok false and the worker must return: the next push starts a new
// one.
func (q *queue[T]) next() (v T, ok bool) {
	q.mu.Lock()
	if q.head == len(q.items) {
		q.items, q.head, q.active = nil, 0, false // drained: let the slice go
		q.mu.Unlock()
		return v, false
	}
	var zero T
	v, q.items[q.head] = q.items[q.head], zero
	q.head++
	q.mu.Unlock()
	select { // wake a blocked push
	case q.space <- struct{}{}:
	default:
	}
	return v, true
}

// len returns the number of queued items.
func (q *queue[T]) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) - q.head
}

// close refuses further pushes; a running worker still drains what is
// queued.
func (q *queue[T]) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}
