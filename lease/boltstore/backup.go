package boltstore

import (
	"errors"
	"fmt"
	"io"
	"os"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/lease"
)

// keyRestorePending marks a backup copy: Open refuses the file until
// BumpEpoch has raised its epoch (and removed the mark), so that a restored
// store can never mint a token at or below one the lost timeline minted
// (invariant I1).
var keyRestorePending = []byte("restore_pending")

// ErrRestorePending: the file is a backup copy whose epoch has not been
// bumped yet (MarkRestorePending, BumpEpoch).
var ErrRestorePending = errors.New("boltstore: backup copy: bump its epoch before serving it")

// Backup writes a consistent copy of the store file to w, taken from one
// read-only transaction while the store serves (bbolt's Tx.WriteTo), and
// returns the bytes written. onSize, if not nil, gets the copy's size
// before the first byte. The copy is marked as a backup (MarkRestorePending)
// before a byte of it leaves: a copy, however it was fetched, is refused by
// Open until BumpEpoch has raised its epoch (I1). The snapshot is staged in
// a temporary file, removed before Backup returns.
func (s *Store) Backup(w io.Writer, onSize func(int64)) (int64, error) {
	f, err := os.CreateTemp("", "fencegate-lease-backup-*.db")
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := s.w.Snapshot(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(f)
		return err
	}); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	if _, err := MarkRestorePending(f.Name()); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	return streamFile(f.Name(), w, onSize)
}

// streamFile writes the file at path to w, its size to onSize first.
func streamFile(path string, w io.Writer, onSize func(int64)) (int64, error) {
	r, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	defer r.Close()
	st, err := r.Stat()
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	if onSize != nil {
		onSize(st.Size())
	}
	n, err := io.Copy(w, r)
	if err != nil {
		return n, fmt.Errorf("backup: %w", err)
	}
	return n, nil
}

// Summary describes a lease store file.
type Summary struct {
	Epoch          uint64
	Domains        int // domain records (each keeps its seq high-water mark)
	RestorePending bool
}

// MarkRestorePending checks that the file at path (not open elsewhere) is
// a lease store, marks it as a backup copy that Open refuses until
// BumpEpoch, and summarizes it.
func MarkRestorePending(path string) (Summary, error) {
	db, err := openDB(path, Options{})
	if err != nil {
		return Summary{}, err
	}
	defer db.Close()
	var sum Summary
	err = db.Update(func(tx *bolt.Tx) error {
		if err := summarize(tx, &sum); err != nil {
			return err
		}
		sum.RestorePending = true
		return tx.Bucket(bucketMeta).Put(keyRestorePending, []byte("1"))
	})
	if err != nil {
		return Summary{}, fmt.Errorf("mark %s: %w", path, err)
	}
	return sum, nil
}

func summarize(tx *bolt.Tx, sum *Summary) error {
	meta, domains := tx.Bucket(bucketMeta), tx.Bucket(bucketDomains)
	if meta == nil || domains == nil {
		return fmt.Errorf("%w: not a lease store (buckets missing)", lease.ErrCorrupt)
	}
	epoch, err := decodeEpoch(meta.Get(keyEpoch))
	if err != nil {
		return err
	}
	sum.Epoch, sum.Domains, sum.RestorePending = epoch, domains.Stats().KeyN, meta.Get(keyRestorePending) != nil
	return nil
}

// checkNotPending refuses a backup copy whose epoch was not bumped.
func checkNotPending(meta *bolt.Bucket) error {
	if meta.Get(keyRestorePending) != nil {
		return fmt.Errorf("%w: run 'controller epoch-bump --data-dir DIR' on it first", ErrRestorePending)
	}
	return nil
}
