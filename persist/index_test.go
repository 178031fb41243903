package persist

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/internal/groupcommit"
)

// TestIndexPresence: an index entry is seen in the transaction that writes
// it (the batch that accepts a command also prunes), and an entry an older
// version wrote with an empty value is seen once it is in the file.
func TestIndexPresence(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "i.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key, old := []byte("p\x00c0"), []byte("p\x00old")
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketPending)
		if err != nil {
			return err
		}
		if err := b.Put(old, nil); err != nil { // as versions before indexMark wrote it
			return err
		}
		if err := b.Put(key, indexMark); err != nil {
			return err
		}
		if !has(groupcommit.Wrap(tx).Bucket(bucketPending), key) {
			t.Error("an entry is not seen in the transaction that wrote it")
		}
		if has(groupcommit.Wrap(tx).Bucket(bucketPending), []byte("p\x00nope")) {
			t.Error("a missing entry is seen")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		if b := groupcommit.Wrap(tx).Bucket(bucketPending); !has(b, old) || !has(b, key) {
			t.Errorf("committed entries: old empty-valued seen %v, new seen %v", has(b, old), has(b, key))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
