package agent

import (
	"testing"
	"time"
)

func TestQueueFIFOWithinLimit(t *testing.T) {
	q := newQueue[int](3)
	for i := range 3 {
		if !q.tryPush(i) {
			t.Fatalf("push %d refused below the limit", i)
		}
	}
	if q.tryPush(3) {
		t.Fatal("push beyond the limit taken")
	}
	for want := range 3 {
		if v, ok := q.pop(); !ok || v != want {
			t.Fatalf("pop = %d, %v; want %d", v, ok, want)
		}
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop from an empty queue succeeded")
	}
	if q.items != nil || cap(q.items) != 0 {
		t.Fatalf("a drained queue holds a slice of cap %d", cap(q.items))
	}
}

func TestQueuePushWaitsForRoom(t *testing.T) {
	q := newQueue[int](1)
	q.tryPush(1)
	pushed := make(chan bool)
	go func() { pushed <- q.push(2) }()
	select {
	case <-pushed:
		t.Fatal("push into a full queue returned before a pop")
	case <-time.After(50 * time.Millisecond):
	}
	if v, _ := q.pop(); v != 1 {
		t.Fatalf("pop = %d, want 1", v)
	}
	if !<-pushed {
		t.Fatal("push after a pop failed")
	}
	if v, _ := q.pop(); v != 2 {
		t.Fatalf("pop = %d, want 2", v)
	}
}

func TestQueueCloseDrainsThenDone(t *testing.T) {
	q := newQueue[int](4)
	q.tryPush(7)
	q.close()
	if q.tryPush(8) || q.push(8) {
		t.Fatal("push after close taken")
	}
	if q.done() {
		t.Fatal("done with an item still queued")
	}
	if v, ok := q.pop(); !ok || v != 7 {
		t.Fatalf("pop after close = %d, %v; want 7", v, ok)
	}
	if !q.done() {
		t.Fatal("closed and drained, not done")
	}
}
