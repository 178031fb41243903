package groupcommit

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunnableSubmittersShareOneBatch: submitters that are runnable when
// the writer takes the first request join its batch, even when the CPU
// has no time to run them before the writer would otherwise commit. On one
// processor and with no fsync to wait on (NoSync), a writer that commits
// at once would commit each of them alone: the submitters only get to run
// after it blocks again. Every write must still be durable and visible.
func TestRunnableSubmittersShareOneBatch(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var commits, ops atomic.Int64
	s := openLogged(t, filepath.Join(t.TempDir(), "b.db"), 1<<20, CommitterOptions{OnCommit: func(n int, _ time.Duration) {
		commits.Add(1)
		ops.Add(int64(n))
	}})
	s.db.NoSync = true
	const submitters = 64
	var wg sync.WaitGroup
	for i := range submitters {
		wg.Go(func() {
			if err := s.tryPut(fmt.Sprintf("k%02d", i), "v"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ops.Load() != submitters {
		t.Fatalf("%d operations committed, want %d", ops.Load(), submitters)
	}
	if c := commits.Load(); c > submitters/8 {
		t.Fatalf("%d submitters took %d commits: runnable submitters did not join the open batch", submitters, c)
	}
	err := s.c.View(func(tx *Tx) error {
		for i := range submitters {
			if v := tx.Bucket(testBucket).Get(fmt.Appendf(nil, "k%02d", i)); string(v) != "v" {
				return fmt.Errorf("k%02d = %q after its Submit returned", i, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLoneSubmitterIsNotHeldBack: with nothing else runnable the writer
// commits a lone request at once — the yield before a batch waits for no
// timer and no second submitter.
func TestLoneSubmitterIsNotHeldBack(t *testing.T) {
	var commits atomic.Int64
	s := openLogged(t, filepath.Join(t.TempDir(), "b.db"), 1<<20, CommitterOptions{OnCommit: func(int, time.Duration) { commits.Add(1) }})
	for i := range 20 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := s.tryPut(fmt.Sprintf("k%02d", i), "v"); err != nil {
				t.Error(err)
			}
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second): // a hang, not a speed limit
			t.Fatalf("put %d did not return: the writer waited for a second submitter", i)
		}
	}
	if c := commits.Load(); c != 20 {
		t.Fatalf("20 sequential puts took %d commits, want one each", c)
	}
}
