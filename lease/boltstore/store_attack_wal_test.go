package boltstore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/boltstore"
)

// TestAttackWALRestoredBackupSeqGoesBack: the controller's restore
// procedure (Backup, put the copy in place, BumpEpoch, start) leaves the
// live leases.db.wal beside the copy. The restored store's first open
// replays nothing (the live log is past the backup's generation) and
// starts the generation after the backup's — already used by the live
// timeline, whose records of it are still in the log. The restored
// controller records seq 50 for the domain (durable); it crashes; the
// reopen replays its record and then the live timeline's next record of
// that generation, which puts the domain's high-water seq back to 13. The
// controller would mint seq 14.. again at its (bumped) epoch, after it
// already minted up to 50 there: I1 (Seq "never decreases") and I4.
func TestAttackWALRestoredBackupSeqGoesBack(t *testing.T) {
	ctx := context.Background()
	livePath := filepath.Join(t.TempDir(), "leases.db")
	live, err := boltstore.Open(livePath, boltstore.Options{Epoch: 1_700_000_000_000})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	var rec lease.Record
	put := func(s *boltstore.Store, seq uint64) {
		t.Helper()
		rec.Seq = seq
		if rec, err = s.Put(ctx, "d", rec); err != nil {
			t.Fatalf("put seq %d: %v", seq, err)
		}
	}
	put(live, 10) // version 1
	var backup bytes.Buffer
	if _, err := live.Backup(&backup, nil); err != nil {
		t.Fatal(err)
	}
	put(live, 11)                                                  // version 2: the backup's generation
	if _, err := live.Backup(new(bytes.Buffer), nil); err != nil { // a later backup: checkpoint
		t.Fatal(err)
	}
	put(live, 12) // version 3: next generation, seq 0
	put(live, 13) // version 4: next generation, seq 1
	crashed := boltstore.CrashImage(t, livePath)

	restored := filepath.Join(filepath.Dir(crashed), "leases.db")
	if err := os.WriteFile(restored, backup.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := boltstore.BumpEpoch(restored, time.UnixMilli(1_800_000_000_000), time.Second); err != nil {
		t.Fatal(err)
	}
	r, err := boltstore.Open(restored, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rec, err = r.Load(ctx, "d"); err != nil || rec.Seq != 10 || rec.Version != 1 {
		t.Fatalf("restored record %+v %v, want the backup's version 1 seq 10", rec, err)
	}
	put(r, 50) // version 2, same length as the live timeline's version-3 record
	again := boltstore.CrashImage(t, restored)
	r.Close()

	s, err := boltstore.Open(again, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Load(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq < 50 {
		t.Fatalf("after the restored controller's crash: domain record %+v: seq went back from the acknowledged 50 (a lost timeline's log record was replayed)", got)
	}
}

// TestAttackWALCloseAfterFailedCheckpointLeaksLock: as persist's: on a full
// disk the log takes the Puts, the checkpoint at Close fails, and
// Store.Close returns before closing the bbolt file; a reopen in the same
// process, once space is back, is refused as locked.
func TestAttackWALCloseAfterFailedCheckpointLeaksLock(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=18m"); err != nil { // the preallocated log (16 MiB) and a little more
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	path := filepath.Join(dir, "leases.db")
	opts := boltstore.Options{Epoch: 1_700_000_000_000, LockTimeout: 200 * time.Millisecond}
	s, err := boltstore.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	for i := range 3000 {
		if _, err := s.Put(context.Background(), fmt.Sprintf("domain-%04d", i), lease.Record{Seq: uint64(i + 1)}); err != nil {
			break
		}
	}
	closeErr := s.Close()
	if closeErr == nil {
		t.Skip("Close checkpointed on a full disk: no failure to attack")
	}
	t.Logf("Close: %v", closeErr)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	r, err := boltstore.Open(path, opts)
	if err != nil {
		t.Fatalf("reopen after a failed Close, with space back: %v (the failed Close left the bbolt file open and locked)", err)
	}
	r.Close()
}
