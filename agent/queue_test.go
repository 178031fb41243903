package agent

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// manual is a spawn that records worker starts instead of running them.
type manual struct{ starts int }

func (m *manual) spawn() { m.starts++ }

func TestQueueFIFOWithinLimitOneWorker(t *testing.T) {
	var m manual
	q := newQueue[int](3, m.spawn)
	for i := range 3 {
		if r := q.tryPush(i); r != pushed {
			t.Fatalf("push %d: %v below the limit", i, r)
		}
	}
	if r := q.tryPush(3); r != full {
		t.Fatalf("push beyond the limit: %v, want full", r)
	}
	if m.starts != 1 {
		t.Fatalf("%d workers started for one burst, want 1", m.starts)
	}
	for want := range 3 {
		if v, ok := q.next(); !ok || v != want {
			t.Fatalf("next = %d, %v; want %d", v, ok, want)
		}
	}
	if _, ok := q.next(); ok {
		t.Fatal("next from an empty queue succeeded")
	}
	if q.items != nil || q.active {
		t.Fatalf("a drained queue holds a slice of cap %d, active %v", cap(q.items), q.active)
	}
	q.tryPush(9)
	if m.starts != 2 {
		t.Fatalf("a push into the drained queue started %d workers in all, want 2", m.starts)
	}
}

func TestQueuePushWaitsForRoom(t *testing.T) {
	var m manual
	q := newQueue[int](1, m.spawn)
	q.tryPush(1)
	pushed := make(chan bool)
	go func() { pushed <- q.push(2) }()
	select {
	case <-pushed:
		t.Fatal("push into a full queue returned before the worker took an item")
	case <-time.After(50 * time.Millisecond):
	}
	if v, _ := q.next(); v != 1 {
		t.Fatalf("next = %d, want 1", v)
	}
	if !<-pushed {
		t.Fatal("push after next failed")
	}
	if v, _ := q.next(); v != 2 {
		t.Fatalf("next = %d, want 2", v)
	}
}

func TestQueueCloseKeepsWhatIsQueued(t *testing.T) {
	var m manual
	q := newQueue[int](4, m.spawn)
	q.tryPush(7)
	q.close()
	if q.tryPush(8) != closedOut || q.push(8) {
		t.Fatal("push after close taken")
	}
	if v, ok := q.next(); !ok || v != 7 {
		t.Fatalf("next after close = %d, %v; want 7", v, ok)
	}
}

// holds: with real worker goroutines and concurrent pushers, every item is
// handled once, by one worker at a time.
func TestQueueWorkersHandleEachItemOnce(t *testing.T) {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		seen    = map[int]int{}
		running atomic.Int32
		q       *queue[int]
	)
	worker := func() {
		for {
			v, ok := q.next()
			if !ok {
				return
			}
			if running.Add(1) > 1 {
				t.Error("two workers at once")
			}
			mu.Lock()
			seen[v]++
			mu.Unlock()
			running.Add(-1)
		}
	}
	q = newQueue[int](1000, func() { wg.Go(worker) })
	var pushers sync.WaitGroup
	for p := range 4 {
		pushers.Go(func() {
			for i := range 200 {
				q.push(p*1000 + i)
			}
		})
	}
	pushers.Wait()
	q.close()
	wg.Wait()
	if len(seen) != 800 {
		t.Fatalf("%d distinct items handled, want 800", len(seen))
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("item %d handled %d times", v, n)
		}
	}
}
