package groupcommit

// Attack tests of commit 3b125e6: the writer calls letSubmittersIn (up to
// maxYields runtime.Gosched calls while the queue grows) before it collects
// each batch. Each test tries to turn that yield into a broken invariant:
// a caller released or a read served before its batch is durable, a
// request lost or run twice around Close, a failure not failing those that
// follow, a batch past MaxBatch, writes reordered, or a submitter that
// never returns. Hang timeouts are generous and never speed limits.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/internal/proctest"
)

// keySet is a concurrent set of keys.
type keySet struct {
	mu sync.Mutex
	m  map[string]bool
}

func newKeySet() *keySet { return &keySet{m: map[string]bool{}} }

func (s *keySet) add(k string) { s.mu.Lock(); s.m[k] = true; s.mu.Unlock() }

func (s *keySet) has(k string) bool { s.mu.Lock(); defer s.mu.Unlock(); return s.m[k] }

func (s *keySet) snapshot() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.m))
	for k := range s.m {
		out = append(out, k)
	}
	return out
}

// TestAttack22NoReleaseOrReadBeforeDurable: many submitters and readers
// race the yielding writer. A Submit must not return before its write is
// durable (reported to OnDurable, and in the log file: a crash copy taken
// after it returned replays it), and a View must never see a write that is
// not yet durable.
func TestAttack22NoReleaseOrReadBeforeDurable(t *testing.T) {
	proctest.AtProcs(t, func(t *testing.T) {
		durable := newKeySet()
		s := openLogged(t, filepath.Join(t.TempDir(), "a.db"), 0, CommitterOptions{ // 16 MiB log: no checkpoint, the bbolt file stays as opened
			OnDurable: func(bucket, key, _ []byte) {
				if string(bucket) == string(testBucket) {
					durable.add(string(key))
				}
			},
		})
		acked := newKeySet()
		var violations atomic.Int64
		var firstViolation atomic.Value
		violate := func(msg string) {
			if violations.Add(1) == 1 {
				firstViolation.Store(msg)
			}
		}
		const submitters, each = 32, 40
		stop := make(chan struct{})
		var readers sync.WaitGroup
		for range 3 {
			readers.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					err := s.c.View(func(tx *Tx) error {
						return tx.Bucket(testBucket).ForEach(func(k, _ []byte) error {
							if !durable.has(string(k)) {
								violate(fmt.Sprintf("View saw %q before OnDurable reported it durable", k))
							}
							return nil
						})
					})
					if err != nil {
						violate(fmt.Sprintf("View: %v", err))
						return
					}
					runtime.Gosched()
				}
			})
		}
		type crashImage struct {
			path  string
			acked []string
		}
		var images []crashImage
		var imager sync.WaitGroup
		imager.Go(func() {
			for range 4 {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				a := acked.snapshot() // everything acknowledged before the copy starts
				images = append(images, crashImage{s.crashCopy(t, true), a})
			}
		})
		var wg sync.WaitGroup
		for g := range submitters {
			wg.Go(func() {
				for i := range each {
					k := fmt.Sprintf("g%02d-%03d", g, i)
					err := s.tryPut(k, "v")
					if err != nil {
						violate(fmt.Sprintf("Submit %s: %v", k, err))
						return
					}
					if !durable.has(k) {
						violate(fmt.Sprintf("Submit %s returned before OnDurable reported it", k))
					}
					acked.add(k)
				}
			})
		}
		proctest.Wait(t, &wg, "submitters")
		close(stop)
		proctest.Wait(t, &readers, "readers")
		proctest.Wait(t, &imager, "crash copier")
		if n := violations.Load(); n > 0 {
			t.Fatalf("%d violations; first: %v", n, firstViolation.Load())
		}
		for i, im := range images {
			got := reopenKeys(t, im.path)
			for _, k := range im.acked {
				if _, ok := got[k]; !ok {
					t.Errorf("crash image %d: acknowledged %s lost (%d acked, %d replayed)", i, k, len(im.acked), len(got))
					break
				}
			}
		}
		final := reopenKeys(t, s.crashCopy(t, true))
		if len(final) != submitters*each {
			t.Fatalf("final crash image holds %d keys, want %d", len(final), submitters*each)
		}
	})
}

// TestAttack22CloseRacesYieldingWriter: Close comes while submitters are
// queueing and the writer is yielding. Every Submit returns (no hang), with
// nil or ErrClosed only; a nil one ran its write exactly once and the write
// is in the file Close checkpointed; an ErrClosed one never ran and is not
// in the file. Nothing is left queued and unreleased.
func TestAttack22CloseRacesYieldingWriter(t *testing.T) {
	proctest.AtProcs(t, func(t *testing.T) {
		for round := range 15 {
			path := filepath.Join(t.TempDir(), "c.db")
			s := openLogged(t, path, 0, CommitterOptions{MaxBatch: 8})
			const submitters, each = 24, 30
			var runs sync.Map // key -> *atomic.Int64
			var results sync.Map
			var acked atomic.Int64
			var wg sync.WaitGroup
			for g := range submitters {
				wg.Go(func() {
					for i := range each {
						k := fmt.Sprintf("g%02d-%03d", g, i)
						n := &atomic.Int64{}
						runs.Store(k, n)
						err := s.c.Submit(context.Background(), k, func(tx *Tx) (bool, error) {
							n.Add(1)
							return true, tx.Bucket(testBucket).Put([]byte(k), []byte("v"))
						})
						results.Store(k, err)
						if err != nil {
							return
						}
						acked.Add(1)
					}
				})
			}
			closeAt := int64(1 + round*submitters*each/20)
			var closeErr error
			var closer sync.WaitGroup
			closer.Go(func() {
				for acked.Load() < closeAt {
					runtime.Gosched()
				}
				closeErr = s.c.Close()
			})
			proctest.Wait(t, &wg, "submitters racing Close")
			proctest.Wait(t, &closer, "Close")
			if closeErr != nil {
				t.Fatalf("round %d: Close: %v", round, closeErr)
			}
			s.db.Close()
			s.c = nil
			got := reopenKeys(t, path) // Close checkpointed: the file alone must do, the log replays nothing stale
			nilCount := 0
			results.Range(func(key, v any) bool {
				k := key.(string)
				n, _ := runs.Load(k)
				ran := n.(*atomic.Int64).Load()
				_, inFile := got[k]
				switch err, _ := v.(error); {
				case err == nil:
					nilCount++
					if ran != 1 || !inFile {
						t.Errorf("round %d: %s acknowledged but ran %d times, in file %v", round, k, ran, inFile)
					}
				case errors.Is(err, ErrClosed):
					if ran != 0 || inFile {
						t.Errorf("round %d: %s refused with ErrClosed but ran %d times, in file %v", round, k, ran, inFile)
					}
				default:
					t.Errorf("round %d: %s: unexpected error %v", round, k, err)
				}
				return true
			})
			if len(got) != nilCount {
				t.Errorf("round %d: file holds %d keys, %d were acknowledged", round, len(got), nilCount)
			}
			if t.Failed() {
				return
			}
		}
	})
}

// TestAttack22FailureFailsEveryLaterSubmitter: a commit fails while
// submitters keep coming and the writer yields. Every acknowledged write
// replays after a crash; no write submitted after the failure runs or is
// visible; once a submitter has seen ErrFailed, each later Submit of it
// fails too; nobody hangs.
func TestAttack22FailureFailsEveryLaterSubmitter(t *testing.T) {
	proctest.AtProcs(t, func(t *testing.T) {
		for round := range 10 {
			var commits atomic.Int64
			var failed atomic.Bool
			failAt := int64(2 + round%6)
			var ranAfterFail atomic.Int64
			s := openLogged(t, filepath.Join(t.TempDir(), "f.db"), 0, CommitterOptions{
				MaxBatch: 16,
				BeforeCommit: func() error {
					if commits.Add(1) >= failAt {
						failed.Store(true)
						return errors.New("injected: disk gone")
					}
					return nil
				},
			})
			const submitters, each = 16, 20
			acked := newKeySet()
			refused := newKeySet()
			var wg sync.WaitGroup
			for g := range submitters {
				wg.Go(func() {
					sawFail := false
					for i := range each {
						k := fmt.Sprintf("g%02d-%03d", g, i)
						err := s.c.Submit(context.Background(), k, func(tx *Tx) (bool, error) {
							if failed.Load() {
								ranAfterFail.Add(1)
							}
							return true, tx.Bucket(testBucket).Put([]byte(k), []byte("v"))
						})
						switch {
						case err == nil:
							if sawFail {
								t.Errorf("round %d: %s acknowledged after its submitter saw ErrFailed", round, k)
							}
							acked.add(k)
						case errors.Is(err, ErrFailed):
							sawFail = true
							refused.add(k)
						default:
							t.Errorf("round %d: %s: %v, want nil or ErrFailed", round, k, err)
						}
					}
				})
			}
			proctest.Wait(t, &wg, "submitters around a failed commit")
			if !failed.Load() {
				t.Fatalf("round %d: the failure was never injected (%d commits)", round, commits.Load())
			}
			if n := ranAfterFail.Load(); n > 0 {
				t.Errorf("round %d: %d writes ran after the committer failed", round, n)
			}
			if err := s.c.View(func(*Tx) error { return nil }); !errors.Is(err, ErrFailed) {
				t.Errorf("round %d: View after failure: %v, want ErrFailed", round, err)
			}
			got := reopenKeys(t, s.crashCopy(t, true))
			for _, k := range acked.snapshot() {
				if _, ok := got[k]; !ok {
					t.Errorf("round %d: acknowledged %s lost after the failure", round, k)
				}
			}
			for _, k := range refused.snapshot() {
				if _, ok := got[k]; ok {
					t.Errorf("round %d: %s failed but replays after a crash", round, k)
				}
			}
			if t.Failed() {
				return
			}
		}
	})
}

// TestAttack22MaxBatchHolds: however long the writer yields and however
// many submitters pile up, a batch never takes more than MaxBatch
// operations (counted by the writes run between two AfterBatch calls, and
// by OnCommit), including MaxBatch 1, where the queue holds one request.
func TestAttack22MaxBatchHolds(t *testing.T) {
	proctest.AtProcs(t, func(t *testing.T) {
		for _, maxBatch := range []int{1, 2, 3, 7, 64} {
			var inBatch, over, overCommit atomic.Int64
			var biggest atomic.Int64
			s := openLogged(t, filepath.Join(t.TempDir(), "m.db"), 1<<20, CommitterOptions{
				MaxBatch: maxBatch,
				AfterBatch: func(_ *Tx, _ []string) (bool, error) {
					n := inBatch.Swap(0)
					if n > int64(maxBatch) {
						over.Add(1)
					}
					if n > biggest.Load() {
						biggest.Store(n)
					}
					return false, nil
				},
				OnCommit: func(ops int, _ time.Duration) {
					if ops > maxBatch {
						overCommit.Add(1)
					}
				},
			})
			s.db.NoSync = true // more submitters runnable per batch
			const submitters, each = 64, 10
			var wg sync.WaitGroup
			for g := range submitters {
				wg.Go(func() {
					for i := range each {
						k := fmt.Sprintf("g%02d-%03d", g, i)
						err := s.c.Submit(context.Background(), k, func(tx *Tx) (bool, error) {
							inBatch.Add(1)
							return true, tx.Bucket(testBucket).Put([]byte(k), []byte("v"))
						})
						if err != nil {
							t.Errorf("Submit %s: %v", k, err)
							return
						}
					}
				})
			}
			proctest.Wait(t, &wg, "submitters")
			if over.Load() > 0 || overCommit.Load() > 0 {
				t.Fatalf("MaxBatch %d: %d batches ran more writes than MaxBatch (largest %d), %d commits reported more", maxBatch, over.Load(), biggest.Load(), overCommit.Load())
			}
			if got := reopenKeys(t, s.crashCopy(t, true)); len(got) != submitters*each {
				t.Fatalf("MaxBatch %d: %d keys replay, want %d", maxBatch, len(got), submitters*each)
			}
			s.close()
		}
	})
}

// TestAttack22OrderKeptAndReplayed: submitters do read-modify-write on one
// key (an append-only list of their ids). The order the writer applied
// them in must respect every happens-before (a Submit that returned before
// another started is applied first), and the view, a crash replay of the
// log and the file after Close must all hold exactly that order.
func TestAttack22OrderKeptAndReplayed(t *testing.T) {
	proctest.AtProcs(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "o.db")
		s := openLogged(t, path, 4096, CommitterOptions{MaxBatch: 32}) // small log: checkpoints in between
		s.db.NoSync = true
		var clock atomic.Int64
		var applied []string // written by the writer goroutine only
		type span struct{ start, end, pos int64 }
		var spansMu sync.Mutex
		spans := map[string]*span{}
		const submitters, each = 16, 25
		var wg sync.WaitGroup
		for g := range submitters {
			wg.Go(func() {
				for i := range each {
					id := fmt.Sprintf("%02d.%02d", g, i)
					sp := &span{start: clock.Add(1)}
					err := s.c.Submit(context.Background(), "list", func(tx *Tx) (bool, error) {
						b := tx.Bucket(testBucket)
						old := string(b.Get([]byte("list")))
						sp.pos = int64(len(applied))
						applied = append(applied, id)
						next := id
						if old != "" {
							next = old + "," + id
						}
						return true, b.Put([]byte("list"), []byte(next))
					})
					sp.end = clock.Add(1)
					if err != nil {
						t.Errorf("Submit %s: %v", id, err)
						return
					}
					spansMu.Lock()
					spans[id] = sp
					spansMu.Unlock()
				}
			})
		}
		proctest.Wait(t, &wg, "submitters")
		want := strings.Join(applied, ",")
		for a, sa := range spans {
			for b, sb := range spans {
				if sa.end < sb.start && sa.pos > sb.pos {
					t.Fatalf("%s returned (t=%d) before %s started (t=%d) but was applied after it (%d > %d)", a, sa.end, b, sb.start, sa.pos, sb.pos)
				}
			}
		}
		var view string
		if err := s.c.View(func(tx *Tx) error { view = string(tx.Bucket(testBucket).Get([]byte("list"))); return nil }); err != nil {
			t.Fatal(err)
		}
		if view != want {
			t.Fatalf("view holds\n%s\nwant the apply order\n%s", view, want)
		}
		if got := reopenKeys(t, s.crashCopy(t, true))["list"]; got != want {
			t.Fatalf("crash replay holds\n%s\nwant the apply order\n%s", got, want)
		}
		s.close()
		if got := reopenKeys(t, path)["list"]; got != want {
			t.Fatalf("file after Close holds\n%s\nwant the apply order\n%s", got, want)
		}
		if n := strings.Count(want, ",") + 1; n != submitters*each {
			t.Fatalf("%d entries applied, want %d", n, submitters*each)
		}
	})
}

// TestAttack22NoStarvationUnderCPUHogs: on one processor with goroutines
// spinning (preempted only asynchronously) and others yielding in a loop,
// a Gosched by the writer hands the processor to them; submitters and a
// reader must still all finish, every write durable and visible.
func TestAttack22NoStarvationUnderCPUHogs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := openLogged(t, filepath.Join(t.TempDir(), "h.db"), 0, CommitterOptions{})
	stop := make(chan struct{})
	var hogs sync.WaitGroup
	var spinStop atomic.Bool
	for range 2 {
		hogs.Go(func() {
			x := 0
			for !spinStop.Load() {
				x++
			}
			_ = x
		})
	}
	for range 4 {
		hogs.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					runtime.Gosched()
				}
			}
		})
	}
	var wg sync.WaitGroup
	const submitters, each = 4, 10
	for g := range submitters {
		wg.Go(func() {
			for i := range each {
				k := fmt.Sprintf("g%d-%02d", g, i)
				if err := s.tryPut(k, strconv.Itoa(i)); err != nil {
					t.Errorf("Submit %s: %v", k, err)
					return
				}
			}
		})
	}
	wg.Go(func() { // a lone reader between batches
		for range 20 {
			if err := s.c.View(func(*Tx) error { return nil }); err != nil {
				t.Errorf("View: %v", err)
				return
			}
		}
	})
	proctest.Wait(t, &wg, "submitters under CPU hogs")
	spinStop.Store(true)
	close(stop)
	proctest.Wait(t, &hogs, "hogs")
	if got := reopenKeys(t, s.crashCopy(t, true)); len(got) != submitters*each {
		t.Fatalf("%d keys replay, want %d", len(got), submitters*each)
	}
}

// TestAttack22SnapshotHoldsOnlyDurableAndEveryAcked: Snapshot while the
// writer yields and batches pile up: each snapshot holds every write
// acknowledged before Snapshot was called, and only durable ones.
func TestAttack22SnapshotHoldsOnlyDurableAndEveryAcked(t *testing.T) {
	proctest.AtProcs(t, func(t *testing.T) {
		durable := newKeySet()
		s := openLogged(t, filepath.Join(t.TempDir(), "s.db"), 8192, CommitterOptions{
			OnDurable: func(bucket, key, _ []byte) {
				if string(bucket) == string(testBucket) {
					durable.add(string(key))
				}
			},
		})
		acked := newKeySet()
		var wg sync.WaitGroup
		const submitters, each = 16, 30
		for g := range submitters {
			wg.Go(func() {
				for i := range each {
					k := fmt.Sprintf("g%02d-%03d", g, i)
					if err := s.tryPut(k, "v"); err != nil {
						t.Errorf("Submit %s: %v", k, err)
						return
					}
					acked.add(k)
				}
			})
		}
		var snaps sync.WaitGroup
		var done atomic.Bool
		snaps.Go(func() {
			for !done.Load() {
				before := acked.snapshot()
				err := s.c.Snapshot(func(tx *bolt.Tx) error {
					b := tx.Bucket(testBucket)
					for _, k := range before {
						if b.Get([]byte(k)) == nil {
							return fmt.Errorf("snapshot lacks %s, acknowledged before Snapshot was called", k)
						}
					}
					return b.ForEach(func(k, _ []byte) error {
						if !durable.has(string(k)) {
							return fmt.Errorf("snapshot holds %s, not yet durable", k)
						}
						return nil
					})
				})
				if err != nil {
					t.Error(err)
					return
				}
				runtime.Gosched()
			}
		})
		proctest.Wait(t, &wg, "submitters")
		done.Store(true)
		proctest.Wait(t, &snaps, "snapshots")
	})
}
