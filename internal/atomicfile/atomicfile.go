// Package atomicfile replaces small files so that a crash leaves either the
// old content or the new one, never a torn file: write a temporary file in
// the same directory, fsync it, rename (or link) it into place, fsync the
// directory. It is a leaf package: it knows nothing of fencegate.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile puts data at path with mode. With overwrite an existing file is
// replaced; without it an existing path is an error wrapping os.ErrExist,
// decided atomically by link(2), and nothing is changed.
func WriteFile(path string, data []byte, mode os.FileMode, overwrite bool) error {
	tmp, err := writeTemp(path, data, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if overwrite {
		err = os.Rename(tmp, path)
	} else {
		err = os.Link(tmp, path)
		os.Remove(tmp)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// writeTemp writes data to a new fsynced temporary file beside path and
// returns its name; on error it leaves no file behind.
func writeTemp(path string, data []byte, mode os.FileMode) (name string, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(mode); err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		return "", err
	}
	return f.Name(), f.Sync()
}

// SyncDir fsyncs a directory, making renames and links in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// MkdirAll is os.MkdirAll that also makes the new directories' entries
// durable: for every directory it creates, it fsyncs the parent, so a data
// directory made at first start survives a power loss with what is in it.
func MkdirAll(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := MkdirAll(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return SyncDir(filepath.Dir(dir))
}
