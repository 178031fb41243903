package persist

import (
	"fmt"
	"io"

	bolt "go.etcd.io/bbolt"
)

// Backup writes a consistent copy of the whole store file to w: it
// checkpoints the write-ahead log, so the copy holds every write durable
// when Backup was called and needs no log, then streams one read-only
// transaction (bbolt's Tx.WriteTo) while the store goes on serving; a
// checkpoint that must grow the file waits for the copy to finish. It
// returns the bytes written. The copy opens with Open like the original (stop the
// agent, put the copy in place of fence.db, start it). onSize, if not
// nil, is called with the copy's size before the first byte is written
// (an HTTP handler sets Content-Length with it).
func (s *Store) Backup(w io.Writer, onSize func(int64)) (int64, error) {
	var n int64
	err := s.w.Snapshot(func(tx *bolt.Tx) error {
		if onSize != nil {
			onSize(tx.Size())
		}
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("backup: %w", err)
	}
	return n, nil
}

// Summary describes a store file: what Inspect found in it.
type Summary struct {
	Schema  string
	Domains map[string]Fence // the fence of each domain
	Devices int              // devices with a fence record
	InDoubt int              // open in-doubt commands
}

// Inspect opens a store file read-only — a backup, or the store of a
// stopped agent — checks that it is a fence store this build reads and
// summarizes it. It changes nothing in the file. It reads the file alone:
// a Backup copy, or the store of an agent stopped cleanly, is whole; after
// a crash the write-ahead log beside the file (LogPath) may hold more,
// which Open replays.
func Inspect(path string) (Summary, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: DefaultLockTimeout})
	if err != nil {
		return Summary{}, fmt.Errorf("inspect %s: %w", path, err)
	}
	defer db.Close()
	sum := Summary{Domains: map[string]Fence{}}
	err = db.View(func(tx *bolt.Tx) error { return summarize(tx, &sum) })
	if err != nil {
		return Summary{}, fmt.Errorf("inspect %s: %w", path, err)
	}
	return sum, nil
}

func summarize(tx *bolt.Tx, sum *Summary) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil || tx.Bucket(bucketDomains) == nil || tx.Bucket(bucketFences) == nil {
		return fmt.Errorf("%w: not a fence store (buckets missing)", ErrCorrupt)
	}
	sum.Schema = string(meta.Get(keySchema))
	err := tx.Bucket(bucketDomains).ForEach(func(k, v []byte) error {
		f, err := decodeFence(domainSlot(string(k)), v)
		sum.Domains[string(k)] = f
		return err
	})
	if err != nil {
		return err
	}
	sum.Devices = tx.Bucket(bucketFences).Stats().KeyN
	if b := tx.Bucket(bucketInDoubt); b != nil {
		sum.InDoubt = b.Stats().KeyN
	}
	return nil
}
