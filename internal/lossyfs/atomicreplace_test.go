package lossyfs_test

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fence/fencetest"
	"github.com/fencegate/fencegate/internal/atomicfile"
	"github.com/fencegate/fencegate/internal/lossyfs"
)

// TestAtomicReplaceSurvivesCutAtEveryStep cuts the power after every step
// (every changing system call) of the atomic replace — temp file, write,
// fsync, rename or link, directory fsync — of the sim's fence file
// (atomicfile with overwrite) and of the controller's key files
// (fence.WritePrivateKey, created by link(2) or replaced): after each cut
// the file holds the old content or the new one, never nothing or a torn
// mix, no temporary file is left, and a write that returned nil is there.
func TestAtomicReplaceSurvivesCutAtEveryStep(t *testing.T) {
	k1, k2 := fencetest.Key(1), fencetest.Key(2)
	tests := []struct {
		name     string
		old, new []byte // old nil: no file before the write
		write    func(path string) error
	}{
		{name: "sim fence file replaced", old: []byte(`{"plant":1}`), new: []byte(`{"plant":2,"yard":7}`),
			write: func(p string) error { return atomicfile.WriteFile(p, []byte(`{"plant":2,"yard":7}`), 0o600, true) }},
		{name: "key file created", new: keyPEM(t, k2),
			write: func(p string) error { return fence.WritePrivateKey(p, k2, false) }},
		{name: "key file replaced", old: keyPEM(t, k1), new: keyPEM(t, k2),
			write: func(p string) error { return fence.WritePrivateKey(p, k2, true) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := lossyfs.MustMount(t)
			steps, err := cutEveryStep(t, m, tc.old, tc.new, tc.write)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("cut after each of the write's %d changing operations", steps)
			if steps < 4 {
				t.Fatalf("the write took %d changing operations; want at least create, write, fsync, rename/link", steps)
			}
		})
	}
}

// cutEveryStep cuts after 0, 1, 2, … changing operations of write until
// it completes with power left, checking the file after each cut, and
// returns how many operations the write took, or the first violation.
func cutEveryStep(t *testing.T, m *lossyfs.Mount, old, new []byte, write func(string) error) (int, error) {
	t.Helper()
	for n := 0; ; n++ {
		done := false
		for _, torn := range []bool{false, true} {
			var err error
			if done, err = cutAfter(t, m, n, torn, old, new, write); err != nil {
				return n, err
			}
		}
		if done {
			return n, nil
		}
	}
}

// cutAfter runs write from the durable old state with the power going
// after n changing operations, cuts (torn or not) and checks the file. It
// reports whether write completed with power left.
func cutAfter(t *testing.T, m *lossyfs.Mount, n int, torn bool, old, new []byte, write func(string) error) (bool, error) {
	t.Helper()
	path := filepath.Join(m.Dir(), "f")
	setDurable(t, m, path, old)
	m.StopAfter(n)
	err := write(path)
	stopped := m.Stopped()
	mustCut(t, m, lossyfs.CutOptions{Torn: torn, Rand: rand.New(rand.NewPCG(uint64(n), 7))})
	got, exists := content(t, path)
	switch {
	case err == nil && !bytes.Equal(got, new):
		return false, fmt.Errorf("cut after %d operations (torn %v): write returned nil but the file holds %q", n, torn, got)
	case !(exists && bytes.Equal(got, new)) && !(old == nil && !exists) && !(old != nil && bytes.Equal(got, old)):
		return false, fmt.Errorf("cut after %d operations (torn %v): the file holds %q (exists %v), neither old nor new", n, torn, got, exists)
	}
	if err := noTemp(m.Dir(), n); err != nil {
		return false, err
	}
	return err == nil && !stopped, nil
}

// setDurable makes path hold data durably (or not exist, data nil), the
// directory synced, with nothing else in it.
func setDurable(t *testing.T, m *lossyfs.Mount, path string, data []byte) {
	t.Helper()
	m.StopAfter(-1)
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if data != nil {
		writeFile(t, m.Dir(), filepath.Base(path), data, true, false)
	}
	syncPath(t, m.Dir())
}

// noTemp reports a temporary file left in dir by a cut after n operations.
func noTemp(dir string, n int) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			return fmt.Errorf("cut after %d operations left the temporary file %s", n, e.Name())
		}
	}
	return nil
}

// TestCutEveryStepCatchesReplaceWithoutFsync is the mutation check of the
// test above: a replace that renames its temporary file without fsyncing
// it first leaves an empty file after some cut, and cutEveryStep says so.
func TestCutEveryStepCatchesReplaceWithoutFsync(t *testing.T) {
	m := lossyfs.MustMount(t)
	naive := func(path string) error {
		if err := os.WriteFile(path+".new", []byte("new"), 0o600); err != nil {
			return err
		}
		if err := os.Rename(path+".new", path); err != nil {
			return err
		}
		d, err := os.Open(filepath.Dir(path))
		if err != nil {
			return err
		}
		defer d.Close()
		return d.Sync()
	}
	_, err := cutEveryStep(t, m, []byte("old"), []byte("new"), naive)
	if err == nil {
		t.Fatal("a replace without fsync of the new file survived a cut at every step")
	}
	t.Logf("caught: %v", err)
}

// keyPEM is the file fence.WritePrivateKey writes for priv (on a real disk).
func keyPEM(t *testing.T, priv ed25519.PrivateKey) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := fence.WritePrivateKey(path, priv, false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
