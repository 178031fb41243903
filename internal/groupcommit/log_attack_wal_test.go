package groupcommit

import (
	"path/filepath"
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
