package boltstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/groupcommit"
	"github.com/fencegate/fencegate/lease"
)

const wal2SnapshotRaceChildEnv = "FENCEGATE_WAL2_BOLTSTORE_SNAPSHOT_RACE_CHILD"

func wal2WaitParked(fn string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "SemacquireMutex") && strings.Contains(g, fn) {
				return
			}
		}
		runtime.Gosched()
	}
}

// TestAttackWAL2ControllerFailedBackupCheckpointRacesWriter: the
// controller's online backup (Store.Backup → Committer.Snapshot) holds
// curMu and its checkpoint fails (disk full); it fails the Committer and
// leaves c.cur nil. A Put (a grant) already past commit's Err check waits
// on curMu in applyLogged; it then runs on the nil transaction and the
// nil-pointer panic kills the controller process, instead of the Put
// returning ErrFailed (fail-stop). Runs in a child process.
func TestAttackWAL2ControllerFailedBackupCheckpointRacesWriter(t *testing.T) {
	if os.Getenv(wal2SnapshotRaceChildEnv) != "" {
		wal2ControllerRaceChild(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttackWAL2ControllerFailedBackupCheckpointRacesWriter$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), wal2SnapshotRaceChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	text := string(out)
	switch {
	case strings.Contains(text, "WAL2-SKIP"):
		t.Skipf("child: %s", text[strings.Index(text, "WAL2-SKIP"):])
	case strings.Contains(text, "panic:"):
		i := strings.Index(text, "panic:")
		t.Fatalf("the controller store's writer panicked after a failed backup checkpoint (process killed, not fail-stop):\n%s", text[i:min(len(text), i+1500)])
	case err != nil || !strings.Contains(text, "WAL2-OK"):
		t.Fatalf("child failed: %v\n%s", err, text)
	}
}

func wal2ControllerRaceChild(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=18m"); err != nil { // the preallocated 16 MiB log and a little more
		fmt.Println("WAL2-SKIP mount tmpfs:", err)
		return
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	s, err := Open(filepath.Join(dir, "leases.db"), Options{Epoch: 1_700_000_000_000, LockTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() // after a failed checkpoint it reports the failure and closes the file
	f, err := os.Create(filepath.Join(dir, "filler"))
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
	big := lease.Record{Seq: 1, Lease: &lease.LeaseRecord{Token: strings.Repeat("t", 1<<20), Epoch: 1, Seq: 1, Holder: "h"}}
	if _, err := s.Put(ctx, "big", big); err != nil {
		fmt.Println("WAL2-SKIP the log refused the big put:", err)
		return
	}
	inView, hold := make(chan struct{}), make(chan struct{})
	viewDone := make(chan error, 1)
	go func() {
		viewDone <- s.w.View(func(*groupcommit.Tx) error { close(inView); <-hold; return nil })
	}()
	<-inView
	backupErr := make(chan error, 1)
	go func() { _, err := s.Backup(io.Discard, nil); backupErr <- err }()
	wal2WaitParked("(*Committer).checkpointAndRead")
	putErr := make(chan error, 1)
	go func() { _, err := s.Put(ctx, "d", lease.Record{Seq: 7}); putErr <- err }()
	wal2WaitParked("(*Committer).applyLogged")
	close(hold)
	if err := <-viewDone; err != nil {
		t.Fatal(err)
	}
	berr, perr := <-backupErr, <-putErr
	if berr == nil {
		fmt.Println("WAL2-SKIP the checkpoint found room on the full disk")
		return
	}
	if !errors.Is(perr, groupcommit.ErrFailed) {
		t.Fatalf("Put queued behind a failed backup checkpoint: %v, want ErrFailed", perr)
	}
	fmt.Println("WAL2-OK backup:", berr, "put:", perr)
}
