// Package proctest holds helpers for tests that attack concurrent code:
// running a test at several GOMAXPROCS settings and telling a hang from a
// slow run without timing anything.
package proctest

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Hang is how long Wait waits before it calls something a hang: far above
// any run on a loaded CI machine, so it never measures speed.
const Hang = 2 * time.Minute

// AtProcs runs fn as a subtest at each of GOMAXPROCS 1, 2 and 8, restoring
// the setting after each.
func AtProcs(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	for _, p := range []int{1, 2, 8} {
		t.Run(fmt.Sprintf("procs=%d", p), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
			fn(t)
		})
	}
}

// Wait waits for wg, or fails the test as a hang after Hang, with every
// goroutine's stack in the message.
func Wait(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(Hang):
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("%s did not finish within %v (hang):\n%s", what, Hang, buf[:n])
	}
}
