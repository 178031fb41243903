package persist

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// walWaitBlockedInView waits (without sleeping) until some goroutine is
// parked on a mutex inside the Committer's View.
func walWaitBlockedInView() {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "sync.(*Mutex).Lock") && strings.Contains(g, "(*Committer).View") {
				return
			}
		}
		runtime.Gosched()
	}
}

// TestAttackWALLookupSeesResultOfFailedComplete: Complete's batch is
// applied to the open transaction, its log write fails; the Committer
// releases curMu before it records the failure (groupcommit applyLogged
// returns, then commit calls c.fail). A Lookup waiting on curMu in that
// window finds no failure yet and reads the command as done, with its
// result — which is durable nowhere: after a restart the command is
// in_doubt. The agent's answerAwaited publishes exactly such a Lookup's
// result to a retry (I3: a result is durable before it is published).
func TestAttackWALLookupSeesResultOfFailedComplete(t *testing.T) {
	const attempts = 150
	for i := range attempts {
		if done, inDoubtAfter := lookupDuringFailedComplete(t, filepath.Join(t.TempDir(), fmt.Sprint(i, ".db"))); done {
			t.Fatalf("attempt %d: a Lookup read dev/c1 as done with its result while Complete failed; after a restart it is %s", i, inDoubtAfter)
		}
	}
}

func lookupDuringFailedComplete(t *testing.T, path string) (sawDone bool, after State) {
	var (
		fail atomic.Bool
		saw  atomic.Bool
		stop atomic.Bool
		wg   sync.WaitGroup
		s    *Store
	)
	s = mustOpenPath(t, path, Options{beforeCommit: func() error {
		if !fail.Load() {
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, ok, err := s.Lookup("dev", "c1"); err == nil && ok && r.State == StateDone {
				saw.Store(true)
			}
		}()
		walWaitBlockedInView()
		return errors.New("disk gone")
	}})
	for range 2 { // keep the failure mutex busy, as concurrent callers do
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_ = s.w.Err()
			}
		}()
	}
	sg := testSigner(t)
	mustAccept(t, s, Command{Device: "dev", ID: "c1", Token: mustToken(t, sg, "dom", 1, 1, "h"), Op: "set"})
	fail.Store(true)
	err := s.Complete(ctxT(t), "dev", "c1", []byte(`"result"`))
	stop.Store(true)
	wg.Wait()
	if err == nil {
		t.Fatal("Complete over a failing log succeeded")
	}
	if !saw.Load() {
		return false, ""
	}
	cp := walCrashCopy(t, path, t.TempDir())
	r := mustOpenPath(t, cp, Options{})
	rec, _, _ := r.Lookup("dev", "c1")
	return true, rec.State
}
