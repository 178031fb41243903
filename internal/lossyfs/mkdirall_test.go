package lossyfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/internal/atomicfile"
	"github.com/fencegate/fencegate/internal/lossyfs"
)

// The data directory an agent or controller makes at its first start
// survives a power cut right after (atomicfile.MkdirAll fsyncs the parent
// of every directory it creates), as does the store file made in it by
// groupcommit.OpenDB's rule (file fsynced, then its directory). Without the
// parent fsyncs — plain os.MkdirAll — the same cut loses the directory
// with everything in it: the near miss shows the test can see it.
func TestDataDirMadeAtFirstStartSurvivesCut(t *testing.T) {
	m := lossyfs.MustMount(t)
	dir := filepath.Join(m.Dir(), "var", "lib", "fencegate")
	if err := atomicfile.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "fence.db")
	writeSynced(t, store)
	if err := atomicfile.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Cut(lossyfs.CutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(store); err != nil {
		t.Fatalf("after the cut: %v, want the store in the data directory made before it", err)
	}

	plain := filepath.Join(m.Dir(), "opt", "data")
	if err := os.MkdirAll(plain, 0o700); err != nil {
		t.Fatal(err)
	}
	writeSynced(t, filepath.Join(plain, "fence.db"))
	if err := atomicfile.SyncDir(plain); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Cut(lossyfs.CutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(plain); err == nil {
		t.Fatal("a directory made by plain os.MkdirAll survived the cut: the test could not tell the fix from its absence")
	}
}

// writeSynced creates path with some content and fsyncs it.
func writeSynced(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("store")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}
