package persist

import (
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
)

const wal2SnapshotRaceChildEnv = "FENCEGATE_WAL2_SNAPSHOT_RACE_CHILD"

// wal2WaitParked waits (without sleeping) until a goroutine is parked on a
// mutex inside fn (a function name of the Committer).
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

// TestAttackWAL2FailedSnapshotCheckpointRacesWriter: the writer goroutine
// checks Err() in commit, before it takes curMu in applyLogged, and never
// again under curMu. A Snapshot (online backup) that holds curMu meanwhile
// and whose checkpoint fails (disk full: the bbolt file cannot grow) fails
// the Committer and leaves c.cur nil. The writer then gets curMu and runs
// the queued batch on the nil transaction: a nil-pointer panic in the
// writer goroutine kills the whole process (the agent, or the controller)
// instead of the fail-stop the package promises (every later call returns
// ErrFailed). Were c.cur not nil (a checkpoint failing before Commit), the
// same batch would be logged and acknowledged on a failed Committer.
//
// The scenario runs in a child process (a panic there must not take the
// test binary with it); the child reports how Backup and Accept ended.
func TestAttackWAL2FailedSnapshotCheckpointRacesWriter(t *testing.T) {
	if os.Getenv(wal2SnapshotRaceChildEnv) != "" {
		wal2SnapshotRaceChild(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttackWAL2FailedSnapshotCheckpointRacesWriter$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), wal2SnapshotRaceChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	text := string(out)
	switch {
	case strings.Contains(text, "WAL2-SKIP"):
		t.Skipf("child: %s", text[strings.Index(text, "WAL2-SKIP"):])
	case strings.Contains(text, "panic:"):
		i := strings.Index(text, "panic:")
		t.Fatalf("the writer panicked after a failed Snapshot checkpoint (process killed, not fail-stop):\n%s", text[i:min(len(text), i+1500)])
	case err != nil || !strings.Contains(text, "WAL2-OK"):
		t.Fatalf("child failed: %v\n%s", err, text)
	}
}

func wal2SnapshotRaceChild(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=6m"); err != nil {
		fmt.Println("WAL2-SKIP mount tmpfs:", err)
		return
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	sg := testSigner(t)
	path := filepath.Join(dir, "fence.db")
	s, err := Open(path, Options{LockTimeout: 200 * time.Millisecond, MaxRecords: 1 << 30, MaxAge: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() // after a failed checkpoint it reports the failure and closes the file
	fillDisk(t, dir)
	args := []byte(`"` + strings.Repeat("y", 256<<10) + `"`)
	if _, err := s.Accept(ctxT(t), Command{Device: "dev", ID: "big", Token: mustToken(t, sg, "dom", 1, 20, "h"), Op: "set", Args: args}); err != nil {
		fmt.Println("WAL2-SKIP the log refused the big accept:", err)
		return
	}
	// Hold curMu with a view, so that the Snapshot and then the writer
	// queue up on it in that order.
	inView, hold := make(chan struct{}), make(chan struct{})
	viewDone := make(chan error, 1)
	go func() {
		viewDone <- s.view(func(*groupcommit.Tx) error { close(inView); <-hold; return nil })
	}()
	<-inView
	backupErr := make(chan error, 1)
	go func() { _, err := s.Backup(io.Discard, nil); backupErr <- err }()
	wal2WaitParked("(*Committer).checkpointAndRead")
	acceptErr := make(chan error, 1)
	go func() {
		_, err := s.Accept(ctxT(t), Command{Device: "dev", ID: "small", Token: mustToken(t, sg, "dom", 1, 21, "h"), Op: "set"})
		acceptErr <- err
	}()
	wal2WaitParked("(*Committer).applyLogged")
	close(hold)
	if err := <-viewDone; err != nil {
		t.Fatal(err)
	}
	berr := <-backupErr
	aerr := <-acceptErr
	if berr == nil {
		fmt.Println("WAL2-SKIP the checkpoint found room on the full disk")
		return
	}
	if !errors.Is(aerr, ErrFailed) {
		t.Fatalf("Accept queued behind a failed Snapshot checkpoint: %v, want ErrFailed", aerr)
	}
	fmt.Println("WAL2-OK backup:", berr, "accept:", aerr)
}
