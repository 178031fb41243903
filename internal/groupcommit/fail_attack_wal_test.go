package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// waitBlockedInView waits (without sleeping) until some goroutine is
// parked in Committer.View on a mutex.
func waitBlockedInView() {
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

// TestAttackWALFailedBatchVisibleToWaitingView: applyLogged applies a
// batch to the open transaction, its log write fails, and it returns with
// curMu released — the Committer is failed only afterwards, in commit
// (c.fail), outside curMu. A View parked on curMu gets it in that window,
// finds Err() still nil, and reads the failed batch's writes, which are in
// no file and never will be (I3: a read sees a write that is not durable;
// the caller of the batch was told it failed).
func TestAttackWALFailedBatchVisibleToWaitingView(t *testing.T) {
	const attempts = 150
	seen := 0
	for i := 0; i < attempts && seen == 0; i++ {
		if viewSawFailedBatch(t, filepath.Join(t.TempDir(), fmt.Sprint(i, ".db"))) {
			seen++
		}
	}
	if seen > 0 {
		t.Fatalf("in %d of up to %d attempts a View saw the writes of a batch whose log write failed", seen, attempts)
	}
}

func viewSawFailedBatch(t *testing.T, path string) bool {
	var (
		fail    atomic.Bool
		saw     atomic.Bool
		viewErr error
		wg      sync.WaitGroup
		stop    atomic.Bool
	)
	var s *loggedStore
	s = openLogged(t, path, 4096, CommitterOptions{BeforeCommit: func() error {
		if !fail.Load() {
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			viewErr = s.c.View(func(tx *Tx) error {
				if tx.Bucket(testBucket).Get([]byte("k1")) != nil {
					saw.Store(true)
				}
				return nil
			})
		}()
		waitBlockedInView()
		return errors.New("disk gone")
	}})
	defer s.close()
	// keep failMu busy so that the writer may park in c.fail
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_ = s.c.Err()
			}
		}()
	}
	s.put(t, "k0", "v")
	fail.Store(true)
	err := s.c.Submit(context.Background(), "", func(tx *Tx) (bool, error) {
		return true, tx.Bucket(testBucket).Put([]byte("k1"), []byte("v"))
	})
	stop.Store(true)
	wg.Wait()
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("Submit over a failing log: %v", err)
	}
	_ = viewErr
	return saw.Load()
}
