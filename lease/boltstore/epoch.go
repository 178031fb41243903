package boltstore

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BumpEpoch raises the epoch of the store file at path to
// max(now in Unix ms, old+1) and returns both. Use it on a file restored
// from a backup, before the controller starts on it: every token minted
// afterwards is greater than every token of the lost timeline, whatever its
// seq. The controller must be stopped (its lock makes BumpEpoch fail with
// lease.ErrLocked otherwise). The file must exist.
func BumpEpoch(path string, now time.Time, lockTimeout time.Duration) (old, bumped uint64, err error) {
	if _, err := os.Stat(path); err != nil {
		return 0, 0, fmt.Errorf("bump epoch: %w", err)
	}
	db, err := openDB(path, Options{LockTimeout: lockTimeout})
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("bump epoch: %w", cerr)
		}
	}()
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("%s is not a lease store (no meta bucket)", path)
		}
		if old, err = decodeEpoch(meta.Get(keyEpoch)); err != nil {
			return err
		}
		bumped = max(uint64(max(now.UnixMilli(), 0)), old+1)
		if err := meta.Delete(keyRestorePending); err != nil { // a restored copy may serve now
			return err
		}
		return meta.Put(keyEpoch, binary.BigEndian.AppendUint64(nil, bumped))
	})
	if err != nil {
		return 0, 0, fmt.Errorf("bump epoch %s: %w", path, err)
	}
	return old, bumped, nil
}
