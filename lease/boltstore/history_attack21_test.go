package boltstore

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// a21Open opens the store at path or fails the test.
func a21Open(t *testing.T, path string) *Store {
	t.Helper()
	st, err := Open(path, Options{Epoch: 1_700_000_000_000})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// a21CrashImage copies the store file and its log at path, as they are
// now, to a fresh directory: what a SIGKILL right now would leave (the
// bbolt file changes only at checkpoints, the log only in Put). The store
// must be idle.
func a21CrashImage(t *testing.T, path string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "leases.db")
	for _, p := range [][2]string{{path, dst}, {LogPath(path), LogPath(dst)}} {
		b, err := os.ReadFile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestAttack21HistoriesAcrossReopensAndCrashes writes every model domain
// to its end (seq 0 to MaxUint64, drops from the bottom and the middle,
// neighbouring names), in a random interleaving, and now and then closes
// and reopens the store or carries on from a crash image (file and log as
// a SIGKILL would leave them, the log holding batches the file lacks, and
// with the 1 MiB log also checkpoints in between). After every Put the
// domain and its neighbours must load as the model says, and at every
// reopen every domain (Load and Scan).
func TestAttack21HistoriesAcrossReopensAndCrashes(t *testing.T) {
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 21))
	ds := a21Domains()
	path := filepath.Join(t.TempDir(), "leases.db")
	st := a21Open(t, path)
	defer func() { st.Close() }()
	ver := make([]int, len(ds))
	left := 0
	for _, d := range ds {
		left += d.maxV
	}
	for step := 0; left > 0; step++ {
		i := rng.IntN(len(ds))
		if ver[i] == ds[i].maxV {
			continue
		}
		n := min(ds[i].maxV-ver[i], 1+rng.IntN(20)) // a burst of grants in one domain
		for range n {
			ver[i]++
			left--
			if err := ds[i].put(ctx, st, ver[i]); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
		for _, j := range []int{i - 1, i, i + 1} {
			if j < 0 || j >= len(ds) {
				continue
			}
			rec, err := st.Load(ctx, ds[j].name)
			if err == nil {
				err = ds[j].check(rec)
			}
			if err == nil && int(rec.Version) != ver[j] {
				t.Fatalf("step %d: domain %q at version %d, want %d", step, ds[j].name, rec.Version, ver[j])
			}
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
		switch rng.IntN(40) {
		case 0: // clean restart
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			st = a21Open(t, path)
		case 1: // SIGKILL now: carry on from what the disk holds
			crashed := a21CrashImage(t, path)
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			path, st = crashed, a21Open(t, crashed)
		default:
			continue
		}
		if _, err := a21CheckAll(ctx, st, ds, ver, ver); err != nil {
			t.Fatalf("step %d, after a reopen: %v", step, err)
		}
	}
	if _, err := a21CheckAll(ctx, st, ds, ver, ver); err != nil {
		t.Fatal(err)
	}
}
