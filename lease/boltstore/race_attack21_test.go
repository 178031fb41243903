package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/lease"
)

// a21Snapshot reads the acknowledged versions.
func a21Snapshot(acked []atomic.Int64) []int {
	out := make([]int, len(acked))
	for i := range acked {
		out[i] = int(acked[i].Load())
	}
	return out
}

// TestAttack21PutRacesLoadScanAndBackup: one writer per model domain
// puts its versions (each Put adds a request and drops some, in the
// group-committed batches other domains share, with checkpoints of the
// 1 MiB log in between) while readers Load and Scan and a third
// goroutine takes Backups. Every record a reader sees must be exactly a
// model version — a record with the requests of another version, half
// synced, is a torn read — and no newer than submitted nor older than
// the reader saw before. Every backup, restored the documented way
// (Open refuses it, BumpEpoch, Open), must hold for each domain a model
// version between what was acknowledged before Backup began and what
// was submitted when it returned, and take grants on from there.
func TestAttack21PutRacesLoadScanAndBackup(t *testing.T) {
	ctx := context.Background()
	ds := a21Domains()
	path := filepath.Join(t.TempDir(), "leases.db")
	st := a21Open(t, path)
	defer st.Close()
	acked := make([]atomic.Int64, len(ds))
	var writers sync.WaitGroup
	var failed atomic.Pointer[error]
	fail := func(err error) {
		if failed.CompareAndSwap(nil, &err) {
			t.Error(err)
		}
	}
	for i, d := range ds {
		writers.Go(func() {
			for v := 1; v <= d.maxV && failed.Load() == nil; v++ {
				if err := d.put(ctx, st, v); err != nil {
					fail(err)
					return
				}
				acked[i].Store(int64(v))
			}
		})
	}
	done := make(chan struct{})
	go func() { writers.Wait(); close(done) }()
	running := func() bool {
		select {
		case <-done:
			return false
		default:
			return failed.Load() == nil
		}
	}
	var readers sync.WaitGroup
	for r := range 4 {
		readers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 21))
			seen := make([]int, len(ds))
			see := func(i int, rec lease.Record) error {
				if err := ds[i].check(rec); err != nil {
					return err
				}
				v := int(rec.Version)
				if v < seen[i] || int64(v) > acked[i].Load()+1 {
					return fmt.Errorf("domain %q: read version %d after %d, %d acknowledged", ds[i].name, v, seen[i], acked[i].Load())
				}
				seen[i] = v
				return nil
			}
			for n := 0; running(); n++ {
				if n%20 == 19 {
					byName := map[string]int{}
					for i, d := range ds {
						byName[d.name] = i
					}
					var scanErr error
					err := st.Scan(ctx, func(domain string, rec lease.Record) bool {
						scanErr = see(byName[domain], rec)
						return scanErr == nil
					})
					if err = errors.Join(err, scanErr); err != nil {
						fail(fmt.Errorf("scan: %w", err))
					}
					continue
				}
				i := rng.IntN(len(ds))
				rec, err := st.Load(ctx, ds[i].name)
				if err == nil {
					err = see(i, rec)
				}
				if err != nil {
					fail(fmt.Errorf("load: %w", err))
				}
			}
		})
	}
	type backup struct {
		copy        []byte
		floor, ceil []int
	}
	var backups []backup
	for running() && len(backups) < 8 {
		time.Sleep(time.Duration(rand.IntN(100)) * time.Millisecond)
		floor := a21Snapshot(acked)
		var buf bytes.Buffer
		if _, err := st.Backup(&buf, nil); err != nil {
			fail(err)
			break
		}
		ceil := a21Snapshot(acked)
		for i := range ceil {
			ceil[i] = min(ceil[i]+1, ds[i].maxV)
		}
		backups = append(backups, backup{buf.Bytes(), floor, ceil})
	}
	<-done
	readers.Wait()
	if failed.Load() != nil {
		t.FailNow()
	}
	full := make([]int, len(ds))
	for i, d := range ds {
		full[i] = d.maxV
	}
	if _, err := a21CheckAll(ctx, st, ds, full, full); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d backups", len(backups))
	if len(backups) < 2 {
		t.Fatalf("only %d backups taken while the writers ran", len(backups))
	}
	for n, b := range backups {
		restored := filepath.Join(t.TempDir(), "leases.db")
		if err := os.WriteFile(restored, b.copy, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(restored, Options{}); !errors.Is(err, ErrRestorePending) {
			t.Fatalf("backup %d: open before the bump: %v, want ErrRestorePending", n, err)
		}
		if _, bumped, err := BumpEpoch(restored, time.UnixMilli(1_600_000_000_000), time.Second); err != nil || bumped <= 1_700_000_000_000 {
			t.Fatalf("backup %d: bump: %d, %v", n, bumped, err)
		}
		r := a21Open(t, restored)
		got, err := a21CheckAll(ctx, r, ds, b.floor, b.ceil)
		if err != nil {
			r.Close()
			t.Fatalf("backup %d: %v", n, err)
		}
		for i, d := range ds {
			if got[i] < d.maxV {
				got[i]++
				if err := d.put(ctx, r, got[i]); err != nil {
					t.Fatal(err)
				}
			}
		}
		_, err = a21CheckAll(ctx, r, ds, got, got)
		r.Close()
		if err != nil {
			t.Fatalf("backup %d, a grant after the restore: %v", n, err)
		}
	}
}
