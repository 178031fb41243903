package groupcommit

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestAttackWALRestoredSnapshotReusesGeneration: a snapshot restored beside
// the live log replays nothing at its first open (the log has moved on) and
// starts, as its next generation, a generation number the LIVE timeline has
// already used — whose records are still in the file. After the restored
// store's first crash, the live timeline's records of that generation are
// replayed onto it, after the restored store's own record of the same
// length: an acknowledged value is overwritten by a value of another
// timeline (and an older one). The doc of Log claims a restored copy
// replays "at most, the exact continuation of itself".
func TestAttackWALRestoredSnapshotReusesGeneration(t *testing.T) {
	s := openLogged(t, filepath.Join(t.TempDir(), "a.db"), 0, CommitterOptions{})
	s.put(t, "fence", "10")
	snap := filepath.Join(t.TempDir(), "snap.db")
	if err := s.c.Snapshot(func(tx *bolt.Tx) error { return tx.CopyFile(snap, 0o600) }); err != nil {
		t.Fatal(err)
	}
	s.put(t, "fence", "20")                                                   // snapshot's generation, seq 0
	if err := s.c.Snapshot(func(*bolt.Tx) error { return nil }); err != nil { // e.g. a second backup: checkpoint
		t.Fatal(err)
	}
	s.put(t, "fence", "30")      // next generation, seq 0
	s.put(t, "fence", "40")      // next generation, seq 1
	live := s.crashCopy(t, true) // power cut of the live agent

	// Operator restores the snapshot in place of the store file; the log stays.
	restored := filepath.Join(t.TempDir(), "restored.db")
	copyFile(t, snap, restored)
	copyFile(t, live+".wal", restored+".wal")
	r := openLogged(t, restored, 0, CommitterOptions{})
	if got := fileKeys(t, r.db); got["fence"] != "10" {
		t.Fatalf("restored store after open: fence=%q, want the snapshot's 10", got["fence"])
	}
	r.put(t, "fence", "50") // acknowledged: durable in the restored store's log
	crashed := r.crashCopy(t, true)
	got := reopenKeys(t, crashed)
	if got["fence"] != "50" {
		t.Fatalf("restored store after a crash: fence=%q, want the acknowledged 50 (a record of the lost live timeline was replayed over it)", got["fence"])
	}
}

// TestAttackWALRestoredSnapshotReplaysOtherTimeline: the same reuse without
// any write of the restored store: its first crash replays the live
// timeline's later generation onto the snapshot, skipping the generation in
// between — a state that never existed.
func TestAttackWALRestoredSnapshotReplaysOtherTimeline(t *testing.T) {
	s := openLogged(t, filepath.Join(t.TempDir(), "a.db"), 0, CommitterOptions{})
	s.put(t, "base", "v")
	snap := filepath.Join(t.TempDir(), "snap.db")
	if err := s.c.Snapshot(func(tx *bolt.Tx) error { return tx.CopyFile(snap, 0o600) }); err != nil {
		t.Fatal(err)
	}
	s.put(t, "gap", "v") // snapshot's generation
	if err := s.c.Snapshot(func(*bolt.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	s.put(t, "later", "v") // the next generation
	live := s.crashCopy(t, true)

	restored := filepath.Join(t.TempDir(), "restored.db")
	copyFile(t, snap, restored)
	copyFile(t, live+".wal", restored+".wal")
	r := openLogged(t, restored, 0, CommitterOptions{})
	wantKeys(t, "restored, first open", fileKeys(t, r.db), "base")
	crashed := r.crashCopy(t, true) // crash before the restored store wrote anything
	got := reopenKeys(t, crashed)
	if _, ok := got["later"]; ok {
		if _, gap := got["gap"]; !gap {
			t.Fatalf("restored store after a crash holds %v: the live timeline's later batch without the one before it (not a continuation of the snapshot)", got)
		}
	}
	wantKeys(t, "restored, after a crash", got, "base")
}

// TestAttackWALRecordLargerThanLogSurvivesCrash (holds): a batch whose
// record is larger than the whole preallocated log, as the first record of
// a generation, is written past the preallocated end and fdatasynced; it
// replays after a crash, and the next batch checkpoints.
func TestAttackWALRecordLargerThanLogSurvivesCrash(t *testing.T) {
	s := openLogged(t, filepath.Join(t.TempDir(), "a.db"), 256, CommitterOptions{})
	big := strings.Repeat("x", 4096)
	s.put(t, "big", big)
	if got := reopenKeys(t, s.crashCopy(t, true)); got["big"] != big {
		t.Fatalf("record larger than the log lost after a crash (%d bytes back)", len(got["big"]))
	}
	s.put(t, "next", "v")
	got := reopenKeys(t, s.crashCopy(t, true))
	wantKeys(t, "after the next batch", got, "big", "next")
}

// TestAttackWALHugeBatchSurvivesCrash (holds): a MaxBatch-sized batch of
// concurrent writers, larger than the log, is durable when released.
func TestAttackWALHugeBatchSurvivesCrash(t *testing.T) {
	s := openLogged(t, filepath.Join(t.TempDir(), "a.db"), 1024, CommitterOptions{MaxBatch: 100000})
	s.put(t, "first", "v")
	var wg sync.WaitGroup
	keys := []string{"first"}
	for i := range 2000 {
		k := fmt.Sprintf("k%04d", i)
		keys = append(keys, k)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.c.Submit(context.Background(), k, func(tx *Tx) (bool, error) {
				return true, tx.Bucket(testBucket).Put([]byte(k), []byte("0123456789abcdef"))
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	wantKeys(t, "after a crash", reopenKeys(t, s.crashCopy(t, true)), keys...)
}

// TestAttackWALCrashAfterCheckpointKeepsOldGenerationOut (holds): after a
// checkpoint the log still holds the previous generation's records behind
// the new generation's first, shorter record; a crash then replays the new
// record only, never the stale tail (which would put k back to "b").
func TestAttackWALCrashAfterCheckpointKeepsOldGenerationOut(t *testing.T) {
	s := openLogged(t, filepath.Join(t.TempDir(), "a.db"), 0, CommitterOptions{})
	s.put(t, "k", strings.Repeat("a", 200))
	s.put(t, "k", "b")
	if got := reopenKeys(t, s.crashCopy(t, true)); got["k"] != "b" {
		t.Fatalf("before the checkpoint: k=%q", got["k"])
	}
	if err := s.c.Snapshot(func(*bolt.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := reopenKeys(t, s.crashCopy(t, true)); got["k"] != "b" {
		t.Fatalf("crash right after the checkpoint: k=%q, want b", got["k"])
	}
	s.put(t, "k", "c")
	if got := reopenKeys(t, s.crashCopy(t, true)); got["k"] != "c" {
		t.Fatalf("crash after the next generation's first record: k=%q, want c", got["k"])
	}
}
