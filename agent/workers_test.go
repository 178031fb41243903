package agent

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// waitGoroutines waits (up to 10 s) until at most n goroutines run, and
// returns the last count.
func waitGoroutines(n int) int {
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := runtime.NumGoroutine()
		if got <= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// goroutineID is the calling goroutine's number, from its stack header
// ("goroutine 42 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	return strings.Fields(string(buf))[1]
}

// One task after another runs on the goroutine that ran the one before
// (or, while that one is going idle, on one other), not on a new one each.
func TestWorkersReuseAnIdleGoroutine(t *testing.T) {
	w := newWorkers(time.Minute)
	defer w.stop()
	seen := map[string]bool{}
	for range 200 {
		id := make(chan string, 1)
		w.Go(func() { id <- goroutineID() })
		seen[<-id] = true
		w.Wait()
		time.Sleep(time.Millisecond) // lets the goroutine reach its idle wait
	}
	if len(seen) > 2 {
		t.Fatalf("200 tasks one after another ran on %d goroutines, want 1 or 2", len(seen))
	}
}

// A task that blocks does not hold up another: each runs on its own
// goroutine, and Wait waits for both.
func TestWorkersBlockedTaskDoesNotDelayAnother(t *testing.T) {
	w := newWorkers(time.Minute)
	defer w.stop()
	release, second := make(chan struct{}), make(chan struct{})
	var done atomic.Int64
	w.Go(func() { <-release; done.Add(1) })
	w.Go(func() { close(second); done.Add(1) })
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the second task did not run while the first was blocked")
	}
	waited := make(chan struct{})
	go func() { w.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while a task was still running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-waited
	if done.Load() != 2 {
		t.Fatalf("%d tasks done after Wait, want 2", done.Load())
	}
}

// Idle goroutines end after idleFor, and stop ends them at once.
func TestWorkersIdleGoroutinesEnd(t *testing.T) {
	base := runtime.NumGoroutine()
	w := newWorkers(20 * time.Millisecond)
	for range 5 {
		block := make(chan struct{})
		for range 8 {
			w.Go(func() { <-block })
		}
		close(block)
		w.Wait()
	}
	if got := waitGoroutines(base); got > base {
		t.Fatalf("%d goroutines 10 s after the last task, want %d: idle workers did not end", got, base)
	}
	w.stop()

	w = newWorkers(time.Hour)
	block := make(chan struct{})
	for range 8 {
		w.Go(func() { <-block })
	}
	close(block)
	w.Wait()
	w.stop() // returns once the idle goroutines ended (the runtime may count them a moment longer)
	if got := waitGoroutines(base); got > base {
		t.Fatalf("%d goroutines after stop, want %d", got, base)
	}
}
