package boltstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fencegate/fencegate/lease"
)

// holds: concurrent Puts on one domain from the same loaded version (the
// compare-and-put behind I1), on a real file, across a reopen: exactly one
// wins, the stored record is the winner's with Version+1 (also as the
// prefix parse reads it), every other Put conflicts and writes nothing, and
// after the reopen the old version still conflicts.
func TestPutAttackConcurrentSameVersionOneWins(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lease.db")
	st, err := Open(path, Options{Epoch: 7})
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]lease.RequestRecord, 256) // a full request list: the prefix parse must not be fooled by it
	for i := range reqs {
		reqs[i] = lease.RequestRecord{ID: fmt.Sprintf(`r%d","version":999,"x":"`, i), Seq: uint64(i)}
	}
	base, err := st.Put(ctx, "d", lease.Record{Seq: 1, Requests: reqs})
	if err != nil || base.Version != 1 {
		t.Fatalf("first put: %+v, %v", base.Version, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var wins []uint64
	for i := range 16 {
		wg.Go(func() {
			next := base
			next.Seq = uint64(100 + i)
			got, err := st.Put(ctx, "d", next)
			switch {
			case err == nil:
				mu.Lock()
				wins = append(wins, got.Seq)
				mu.Unlock()
				if got.Version != 2 {
					t.Errorf("winner's version %d, want 2", got.Version)
				}
			case !errors.Is(err, lease.ErrConflict):
				t.Errorf("put: %v", err)
			}
		})
	}
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("%d Puts from version 1 won (%v), want exactly 1", len(wins), wins)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.Load(ctx, "d")
	if err != nil || rec.Version != 2 || rec.Seq != wins[0] {
		t.Fatalf("after reopen: version %d seq %d (%v), want 2 and %d", rec.Version, rec.Seq, err, wins[0])
	}
	if _, err := st.Put(ctx, "d", base); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("put from version 1 after reopen: %v, want conflict", err)
	}
	if got, err := st.Put(ctx, "d", rec); err != nil || got.Version != 3 {
		t.Fatalf("put from version 2: %+v, %v", got.Version, err)
	}
}
