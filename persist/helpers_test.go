package persist

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fence/fencetest"
)

// testSigner is the deterministic controller key of these tests
// (fencetest's seed 0).
func testSigner(t testing.TB) *fence.Signer { return fencetest.MustSigner(t, 0) }

// mustToken signs a token of domain at (epoch, seq) for holder.
var mustToken = fencetest.MustToken

// mustOpen opens a store in a fresh temporary directory and closes it at the
// end of the test.
func mustOpen(t testing.TB, opts Options) *Store {
	t.Helper()
	return mustOpenPath(t, filepath.Join(t.TempDir(), "fence.db"), opts)
}

func mustOpenPath(t testing.TB, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustAccept(t testing.TB, s *Store, cmd Command) Decision {
	t.Helper()
	d, err := s.Accept(ctxT(t), cmd)
	if err != nil {
		t.Fatalf("accept %s/%s: %v", cmd.Device, cmd.ID, err)
	}
	return d
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// smallDisk mounts a tmpfs of size (mount's size=, e.g. "6m") on a test
// directory and returns the directory; it skips where that is impossible
// (not root).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fillDisk writes a file in dir until its file system is full and returns
// the file's path (remove it to give the space back).
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			return filler // disk full
		}
	}
}
