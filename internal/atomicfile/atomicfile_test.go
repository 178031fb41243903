package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteFile(p, []byte("one"), 0o600, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("two"), 0o600, false); !errors.Is(err, os.ErrExist) {
		t.Fatalf("no-overwrite onto an existing file: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Fatalf("refused write changed the file: %q", b)
	}
	if err := WriteFile(p, []byte("three"), 0o640, true); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "three" || fi.Mode().Perm() != 0o640 {
		t.Fatalf("content %q mode %v", b, fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestWriteFileIntoMissingDirFails(t *testing.T) {
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "f"), nil, 0o600, true); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

func TestMkdirAllCreatesNestedAndExisting(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "c")
	if err := MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("stat %s: %v %v", dir, fi, err)
	}
	if err := MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("existing directory: %v", err)
	}
	file := filepath.Join(root, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(filepath.Join(file, "x"), 0o700); err == nil {
		t.Fatal("a directory under a file was created")
	}
}
