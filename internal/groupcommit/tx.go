package groupcommit

import (
	"errors"

	bolt "go.etcd.io/bbolt"
)

// ErrReadOnly: a write through a Tx handed to a read (View).
var ErrReadOnly = errors.New("groupcommit: write in a read-only view")

// Tx is a transaction as the Committer's callers see it. Reads go straight
// to bbolt; writes go through Bucket.Put, Bucket.Delete and
// CreateBucketIfNotExists, so that a logged Committer can record each one
// in its log before the batch is acknowledged. Only top-level buckets are
// reachable. A Tx is valid only inside the function it was handed to.
type Tx struct {
	tx       *bolt.Tx
	rec      *recorder // nil: writes are not logged
	readOnly bool
}

// Wrap returns an unlogged Tx over tx, for work done outside a Committer
// (a store's recovery at open, tests). Writes reach tx only.
func Wrap(tx *bolt.Tx) *Tx { return &Tx{tx: tx, readOnly: !tx.Writable()} }

// Bucket returns the top-level bucket name, or nil if there is none.
func (t *Tx) Bucket(name []byte) *Bucket {
	b := t.tx.Bucket(name)
	if b == nil {
		return nil
	}
	return &Bucket{b: b, name: name, tx: t}
}

// CreateBucketIfNotExists returns the top-level bucket name, creating it
// (and logging the creation) if it is missing.
func (t *Tx) CreateBucketIfNotExists(name []byte) (*Bucket, error) {
	if t.readOnly {
		return nil, ErrReadOnly
	}
	if b := t.Bucket(name); b != nil {
		return b, nil
	}
	b, err := t.tx.CreateBucket(name)
	if err != nil {
		return nil, err
	}
	t.rec.createBucket(name)
	return &Bucket{b: b, name: name, tx: t}, nil
}

// Bucket is one top-level bucket inside a Tx.
type Bucket struct {
	b    *bolt.Bucket
	name []byte
	tx   *Tx
}

// Get returns the value of key, or nil. The slice is valid only inside the
// transaction and must not be modified.
func (b *Bucket) Get(key []byte) []byte { return b.b.Get(key) }

// ForEach calls fn for every key in order; fn must not write to b.
func (b *Bucket) ForEach(fn func(k, v []byte) error) error { return b.b.ForEach(fn) }

// Stats returns bbolt's statistics of the bucket.
func (b *Bucket) Stats() bolt.BucketStats { return b.b.Stats() }

// Cursor returns a read-only cursor over b; a write to b invalidates it.
func (b *Bucket) Cursor() Cursor { return Cursor{c: b.b.Cursor()} }

// Put sets key to value. b keeps both slices until the transaction ends:
// the caller must not modify them afterwards.
func (b *Bucket) Put(key, value []byte) error {
	if b.tx.readOnly {
		return ErrReadOnly
	}
	if err := b.b.Put(key, value); err != nil {
		return err
	}
	b.tx.rec.put(b.name, key, value)
	return nil
}

// Delete removes key (a missing key is no error).
func (b *Bucket) Delete(key []byte) error {
	if b.tx.readOnly {
		return ErrReadOnly
	}
	if err := b.b.Delete(key); err != nil {
		return err
	}
	b.tx.rec.delete(b.name, key)
	return nil
}

// Cursor is a read-only bbolt cursor.
type Cursor struct{ c *bolt.Cursor }

// First, Last, Seek, Next and Prev are bbolt's.
func (c Cursor) First() (k, v []byte) { return c.c.First() }

// Last moves to the last key.
func (c Cursor) Last() (k, v []byte) { return c.c.Last() }

// Seek moves to key, or to the next key after it.
func (c Cursor) Seek(key []byte) (k, v []byte) { return c.c.Seek(key) }

// Next moves to the next key.
func (c Cursor) Next() (k, v []byte) { return c.c.Next() }

// Prev moves to the previous key.
func (c Cursor) Prev() (k, v []byte) { return c.c.Prev() }
