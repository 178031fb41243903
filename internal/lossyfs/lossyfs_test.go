package lossyfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/internal/lossyfs"
)

// writeFile creates name under dir with data, fsyncing the file if
// syncFile and dir if syncDir.
func writeFile(t *testing.T, dir, name string, data []byte, syncFile, syncDir bool) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if syncFile {
		mustSync(t, f)
	}
	if syncDir {
		syncPath(t, dir)
	}
}

func mustSync(t *testing.T, f *os.File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", f.Name(), err)
	}
}

// syncPath opens path (a file or directory) and fsyncs it.
func syncPath(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mustSync(t, f)
}

func mustCut(t *testing.T, m *lossyfs.Mount, opts lossyfs.CutOptions) lossyfs.CutReport {
	t.Helper()
	rep, err := m.Cut(opts)
	if err != nil {
		t.Fatalf("cut: %v", err)
	}
	return rep
}

// content returns the file's content, or nil and false if it is gone.
func content(t *testing.T, path string) ([]byte, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}

// TestWriteWithoutSyncGoneAfterCut: a write never fsynced is lost by a
// cut, though the file's (synced) entry stays; a fsynced one is kept.
func TestWriteWithoutSyncGoneAfterCut(t *testing.T) {
	m := lossyfs.MustMount(t)
	writeFile(t, m.Dir(), "lost", []byte("unsynced"), false, false)
	writeFile(t, m.Dir(), "kept", []byte("synced"), true, false)
	syncPath(t, m.Dir())
	if b, _ := content(t, filepath.Join(m.Dir(), "lost")); string(b) != "unsynced" {
		t.Fatalf("before the cut a reader sees %q, want the write at once", b)
	}
	rep := mustCut(t, m, lossyfs.CutOptions{})
	if b, ok := content(t, filepath.Join(m.Dir(), "lost")); !ok || len(b) != 0 {
		t.Fatalf("unsynced file after cut: %q (exists %v), want empty", b, ok)
	}
	if b, _ := content(t, filepath.Join(m.Dir(), "kept")); string(b) != "synced" {
		t.Fatalf("fsynced file after cut: %q, want %q", b, "synced")
	}
	if rep.Files != 1 || rep.Writes != 1 {
		t.Fatalf("cut report %+v, want one file with one unsynced write", rep)
	}
}

// TestCutCapturesWhatWasLost: CutOptions.Capture hands back a file's
// content as readers saw it at the cut, unsynced writes included, though
// the cut then loses them; a name that does not exist is left out.
func TestCutCapturesWhatWasLost(t *testing.T) {
	m := lossyfs.MustMount(t)
	if err := os.Mkdir(filepath.Join(m.Dir(), "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(m.Dir(), "sub"), "log", []byte("applied-1\n"), true, true)
	syncPath(t, m.Dir())
	f, err := os.OpenFile(filepath.Join(m.Dir(), "sub", "log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("applied-2\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rep := mustCut(t, m, lossyfs.CutOptions{Capture: []string{"sub/log", "missing"}})
	if got := string(rep.Captured["sub/log"]); got != "applied-1\napplied-2\n" {
		t.Errorf("captured %q, want both lines as readers saw them at the cut", got)
	}
	if _, ok := rep.Captured["missing"]; ok || len(rep.Captured) != 1 {
		t.Errorf("captured %d files (%v), want only sub/log", len(rep.Captured), rep.Captured)
	}
	if b, _ := content(t, filepath.Join(m.Dir(), "sub", "log")); string(b) != "applied-1\n" {
		t.Errorf("after the cut the file holds %q, want only the synced line", b)
	}
}

// TestCreateWithoutDirSyncGoneAfterCut: a fsynced file whose directory was
// never fsynced is gone after a cut.
func TestCreateWithoutDirSyncGoneAfterCut(t *testing.T) {
	m := lossyfs.MustMount(t)
	writeFile(t, m.Dir(), "new", []byte("data"), true, false)
	if rep := mustCut(t, m, lossyfs.CutOptions{}); rep.Entries != 1 {
		t.Fatalf("cut report %+v, want one directory with unsynced entries", rep)
	}
	if _, ok := content(t, filepath.Join(m.Dir(), "new")); ok {
		t.Fatal("file created without a directory fsync survived the cut")
	}
}

// TestRenameNeedsDirSync: a rename not followed by a directory fsync is
// undone by a cut (the old name is back with its content); one followed by
// it is kept — the atomic-replace pattern.
func TestRenameNeedsDirSync(t *testing.T) {
	for _, syncDir := range []bool{false, true} {
		m := lossyfs.MustMount(t)
		writeFile(t, m.Dir(), "target", []byte("old"), true, true)
		writeFile(t, m.Dir(), "target.tmp", []byte("new"), true, false)
		if err := os.Rename(filepath.Join(m.Dir(), "target.tmp"), filepath.Join(m.Dir(), "target")); err != nil {
			t.Fatal(err)
		}
		if syncDir {
			syncPath(t, m.Dir())
		}
		mustCut(t, m, lossyfs.CutOptions{})
		want := map[bool]string{false: "old", true: "new"}[syncDir]
		if b, _ := content(t, filepath.Join(m.Dir(), "target")); string(b) != want {
			t.Fatalf("dir synced %v: target after cut %q, want %q", syncDir, b, want)
		}
		if _, ok := content(t, filepath.Join(m.Dir(), "target.tmp")); ok {
			t.Fatalf("dir synced %v: target.tmp after cut, never durable under that name", syncDir)
		}
	}
}

// TestUnlinkNeedsDirSync: an unlink is undone by a cut unless the
// directory was fsynced after it.
func TestUnlinkNeedsDirSync(t *testing.T) {
	m := lossyfs.MustMount(t)
	writeFile(t, m.Dir(), "a", []byte("a"), true, false)
	writeFile(t, m.Dir(), "b", []byte("b"), true, true)
	for _, name := range []string{"a", "b"} {
		if err := os.Remove(filepath.Join(m.Dir(), name)); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, m.Dir(), "c", nil, false, true) // syncs the directory: both unlinks durable
	if err := os.Remove(filepath.Join(m.Dir(), "c")); err != nil {
		t.Fatal(err)
	}
	mustCut(t, m, lossyfs.CutOptions{})
	for name, want := range map[string]bool{"a": false, "b": false, "c": true} {
		if _, ok := content(t, filepath.Join(m.Dir(), name)); ok != want {
			t.Fatalf("%s exists after cut: %v, want %v", name, ok, want)
		}
	}
}

// TestPwriteTruncateAndMmapSeeWritesAtOnce: writes at offsets and
// truncation are visible at once to read(2) and to a shared mapping (in a
// child process: see the package doc), and a cut brings back the last
// fsynced content.
func TestPwriteTruncateAndMmapSeeWritesAtOnce(t *testing.T) {
	m := lossyfs.MustMount(t)
	path := filepath.Join(m.Dir(), "f")
	writeFile(t, m.Dir(), "f", bytes.Repeat([]byte("a"), 3*4096), true, true)
	if got := child(t, "mmap", path); got != "aa" {
		t.Fatalf("child's mapping before the write reads %q, want aa", got)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("XY"), 4096+10); err != nil {
		t.Fatal(err)
	}
	if got := child(t, "mmap", path); got != "XY" {
		t.Fatalf("child's mapping after pwrite reads %q, want XY", got)
	}
	if err := f.Truncate(4096 + 11); err != nil {
		t.Fatal(err)
	}
	if b, _ := content(t, path); len(b) != 4096+11 || b[4096+10] != 'X' {
		t.Fatalf("after truncate: %d bytes, want %d ending in X", len(b), 4096+11)
	}
	f.Close()
	mustCut(t, m, lossyfs.CutOptions{})
	if b, _ := content(t, path); !bytes.Equal(b, bytes.Repeat([]byte("a"), 3*4096)) {
		t.Fatalf("after cut: %d bytes, want the fsynced 3 pages of a", len(b))
	}
}

// TestTornCutKeepsPagePrefix: with Torn, an unsynced 8-page overwrite is
// kept as a whole number of leading pages — never a partial page, never a
// later page without the earlier ones — and different seeds keep
// different prefixes.
func TestTornCutKeepsPagePrefix(t *testing.T) {
	m := lossyfs.MustMount(t)
	path := filepath.Join(m.Dir(), "f")
	old, nu := bytes.Repeat([]byte("A"), 8*4096), bytes.Repeat([]byte("B"), 8*4096)
	writeFile(t, m.Dir(), "f", old, true, true)
	kept := map[int]bool{}
	for seed := range uint64(24) {
		if err := os.WriteFile(path, nu, 0o600); err != nil { // O_TRUNC, then one 8-page write (or more)
			t.Fatal(err)
		}
		mustCut(t, m, lossyfs.CutOptions{Torn: true, Rand: rand.New(rand.NewPCG(seed, 1))})
		b, _ := content(t, path)
		pages := bytes.Count(b, []byte("B")) / 4096
		if len(b) != 0 && (len(b)%4096 != 0 || !bytes.Equal(b, append(nu[:pages*4096:pages*4096], old[pages*4096:len(b)]...))) {
			t.Fatalf("seed %d: %d bytes after torn cut, not a page prefix of the new write over the old", seed, len(b))
		}
		kept[pages] = true
		if err := os.WriteFile(path, old, 0o600); err != nil {
			t.Fatal(err)
		}
		syncPath(t, path)
	}
	if len(kept) < 3 {
		t.Fatalf("24 torn cuts kept only these page counts: %v", kept)
	}
}

// TestBboltOnMount: bbolt, in child processes, opens, updates, closes
// and reopens a file on the mount (it reads through mmap); with the
// directory fsynced after the file's creation, a committed update survives
// a cut.
func TestBboltOnMount(t *testing.T) {
	m := lossyfs.MustMount(t)
	path := filepath.Join(m.Dir(), "b.db")
	if got := child(t, "bolt-put", path, "v1"); got != "v1" {
		t.Fatalf("after put, close and reopen the child read %q, want v1", got)
	}
	mustCut(t, m, lossyfs.CutOptions{})
	if got := child(t, "bolt-put", path, "v2"); got != "v2" {
		t.Fatalf("after a cut, put, close and reopen the child read %q, want v2", got)
	}
	mustCut(t, m, lossyfs.CutOptions{})
	if got := child(t, "bolt-get", path); got != "v2" {
		t.Fatalf("after cut k = %q, want the committed v2", got)
	}
	if err := m.CopyOut("b.db", filepath.Join(t.TempDir(), "copy.db")); err != nil {
		t.Fatal(err)
	}
}

// TestCutKillsRegisteredProcess: a registered process holding the mount
// busy (its working directory) is killed by Cut, and the FS is mounted
// again afterwards.
func TestCutKillsRegisteredProcess(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh binary on PATH")
	}
	m := lossyfs.MustMount(t)
	// The child enters the mount after its exec, not through cmd.Dir: a
	// chdir between fork and exec waits on this process's FUSE server
	// while the forking thread holds the runtime, and a garbage collection
	// then deadlocks the server (seen under load in CI).
	cmd := exec.Command(sh, "-c", `cd "$0" && exec sleep 600`, m.Dir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m.Register(cmd.Process)
	mustCut(t, m, lossyfs.CutOptions{})
	if err := cmd.Wait(); err == nil {
		t.Fatal("registered process exited cleanly; want it killed by the cut")
	}
	writeFile(t, m.Dir(), "after", []byte("x"), false, false) // mounted again
}

// TestMountRefusesBadInput: mounting at a missing directory fails clearly
// and leaves the FS mountable; a second mount of one FS is refused.
func TestMountRefusesBadInput(t *testing.T) {
	if err := lossyfs.Available(); err != nil {
		t.Skipf("%v (CI runs as root with /dev/fuse)", err)
	}
	f := lossyfs.New()
	if _, err := f.Mount(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("mount at a missing directory succeeded")
	}
	m, err := f.Mount(t.TempDir())
	if err != nil {
		t.Fatalf("mount after a failed one: %v", err)
	}
	t.Cleanup(func() { _ = m.Unmount() })
	if _, err := f.Mount(t.TempDir()); !errors.Is(err, lossyfs.ErrMounted) {
		t.Fatalf("second mount: %v, want ErrMounted", err)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if err := m.Unmount(); !errors.Is(err, lossyfs.ErrUnmounted) {
		t.Fatalf("second unmount: %v, want ErrUnmounted", err)
	}
}

const childEnv = "LOSSYFS_TEST_CHILD"

// TestMain runs the child actions of these tests when childEnv is set.
func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		out, err := runChild(strings.Split(args, "\x1f"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		fmt.Print(out)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child runs this test binary as a child process doing action on path
// and returns what it printed. The test process never maps a file of the
// mount it serves (see the package doc).
func child(t *testing.T, action string, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(append([]string{action}, args...), "\x1f"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child %s %v: %v", action, args, err)
	}
	return string(out)
}

// runChild does a child action: "mmap path" prints bytes 4106..4107 of a
// shared read-only mapping; "bolt-put path v" opens bbolt, syncs the
// directory, puts k=v, closes, reopens and prints k; "bolt-get path"
// prints k.
func runChild(args []string) (string, error) {
	switch {
	case len(args) == 2 && args[0] == "mmap":
		return mmapRead(args[1])
	case len(args) == 3 && args[0] == "bolt-put":
		if err := boltPut(args[1], args[2]); err != nil {
			return "", err
		}
		return boltGet(args[1])
	case len(args) == 2 && args[0] == "bolt-get":
		return boltGet(args[1])
	case len(args) == 1 && args[0] == "fds":
		return openFds()
	}
	return "", fmt.Errorf("unknown child action %q", args)
}

func mmapRead(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := syscall.Mmap(int(f.Fd()), 0, 3*4096, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return "", err
	}
	defer syscall.Munmap(b)
	return string(b[4096+10 : 4096+12]), nil
}

func boltPut(path, v string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		db.Close()
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("b"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte(v))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

func boltGet(path string) (string, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v string
	err = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("b")); b != nil {
			v = string(b.Get([]byte("k")))
		}
		return nil
	})
	return v, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// openFds lists what this process's descriptors point to, one a line.
func openFds() (string, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for _, e := range entries {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		fmt.Fprintln(&out, target)
	}
	return out.String(), nil
}

// TestChildDoesNotInheritFuseFd: a process started while the FS is
// mounted does not inherit the server's /dev/fuse descriptor — else, once
// the test process dies, that child keeps the connection open and its
// own requests on the mount wait forever.
func TestChildDoesNotInheritFuseFd(t *testing.T) {
	lossyfs.MustMount(t)
	for _, target := range strings.Split(child(t, "fds"), "\n") {
		if target == "/dev/fuse" {
			t.Fatal("a child process holds /dev/fuse")
		}
	}
}
