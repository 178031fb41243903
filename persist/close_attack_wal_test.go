package persist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAttackWALCloseAfterFailedCheckpointLeaksLock: with the disk full, the
// log still takes batches (it is preallocated), but the checkpoint Close
// makes needs new pages of the bbolt file and fails. Store.Close returns
// that error before it closes the bbolt file (store.go Close: s.w.Close()
// error returns early), and a second Close only says ErrClosed: the file
// stays open and locked for the life of the process. Once space is back, a
// reopen in this process — the only way to serve again without a restart —
// fails with ErrLocked; the acknowledged batches are unreachable.
func TestAttackWALCloseAfterFailedCheckpointLeaksLock(t *testing.T) {
	dir := smallDisk(t, "6m")
	path := filepath.Join(dir, "fence.db")
	opts := Options{LockTimeout: 200 * time.Millisecond, MaxRecords: 1 << 30, MaxAge: 1 << 62}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	filler := fillDisk(t, dir)
	sg := testSigner(t)
	tok := mustToken(t, sg, "dom", 1, 1, "h")
	args := []byte(`"` + strings.Repeat("x", 1000) + `"`)
	accepted := 0
	for i := range 400 { // within the 1 MiB log: no checkpoint before Close
		_, err := s.Accept(ctxT(t), Command{Device: fmt.Sprintf("dev%d", i%50), ID: fmt.Sprint("c", i), Token: tok, Op: "set", Args: args})
		if err != nil {
			break
		}
		accepted++
	}
	if accepted == 0 {
		t.Fatal("no accept went through the log on a full disk")
	}
	closeErr := s.Close()
	if closeErr == nil {
		t.Skipf("Close checkpointed %d accepts on a full disk: no failure to attack", accepted)
	}
	t.Logf("%d accepts acknowledged; Close: %v", accepted, closeErr)
	if err := s.Close(); err != nil && !errors.Is(err, ErrClosed) {
		t.Logf("second Close: %v", err)
	}
	if err := os.Remove(filler); err != nil { // the operator frees space …
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=64m"); err != nil { // … enough for the replay
		t.Fatal(err)
	}
	r, err := Open(path, opts)
	if err != nil {
		t.Fatalf("reopen after a failed Close, with space back: %v (the failed Close left the bbolt file open and locked)", err)
	}
	defer r.Close()
	if _, ok, err := r.Lookup("dev0", "c0"); err != nil || !ok {
		t.Fatalf("acknowledged accept dev0/c0 after the reopen: %v %v", ok, err)
	}
}
