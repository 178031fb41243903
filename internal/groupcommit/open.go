package groupcommit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/internal/atomicfile"
)

// OpenDB opens (or creates, with mode) the bbolt file at path. If it
// created the file, it fsyncs the file's directory before returning, so a
// new store survives a power loss: bbolt fsyncs the file's content, never
// the directory entry that names it, and a store whose file vanished with
// the entry would come back empty (a lost fence, a reissued epoch). Errors
// are bbolt's, unwrapped (callers test bbolt's errors, e.g. the lock
// timeout), or the directory fsync's.
func OpenDB(path string, mode os.FileMode, opts *bolt.Options) (*bolt.DB, error) {
	_, statErr := os.Stat(path)
	db, err := bolt.Open(path, mode, opts)
	if err != nil {
		return nil, err
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}
