package benchload

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BoltLoad is the baseline without persist's group commit: each operation
// puts one record, the size of a journal record, under a new key in its
// device's bucket of a plain bbolt file with bbolt's default, durable
// options (fdatasync on every commit). Op is safe for concurrent use.
type BoltLoad struct {
	db      *bolt.DB
	batch   bool
	buckets [][]byte
	value   []byte
	txid0   int
}

// OpenBoltLoad opens (creating) the bbolt file at path and creates one
// bucket per device. Each operation is its own DB.Update, or, with batch,
// a DB.Batch call (bbolt's own batching: up to MaxBatchSize calls or
// MaxBatchDelay, 10 ms by default). value is the record every operation puts.
func OpenBoltLoad(path string, devices int, batch bool, value []byte) (*BoltLoad, error) {
	if devices < 1 {
		return nil, fmt.Errorf("%w: devices %d", ErrInvalid, devices)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("bolt load: %w", err)
	}
	l := &BoltLoad{db: db, batch: batch, value: value, buckets: make([][]byte, devices)}
	for i := range l.buckets {
		l.buckets[i] = []byte(DeviceID(i))
	}
	if err := db.Update(l.createBuckets); err != nil {
		db.Close()
		return nil, fmt.Errorf("bolt load: %w", err)
	}
	if l.txid0, err = l.txid(); err != nil {
		db.Close()
		return nil, err
	}
	return l, nil
}

func (l *BoltLoad) createBuckets(tx *bolt.Tx) error {
	for _, b := range l.buckets {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	return nil
}

// Op is an Op: it puts the record under CommandID(i) in device dev's bucket
// and returns once that is committed. ctx is not used: bbolt takes none.
func (l *BoltLoad) Op(_ context.Context, dev, i int) error {
	put := func(tx *bolt.Tx) error {
		return tx.Bucket(l.buckets[dev]).Put([]byte(CommandID(i)), l.value)
	}
	if l.batch {
		return l.db.Batch(put)
	}
	return l.db.Update(put)
}

// Commits returns the number of write transactions committed since
// OpenBoltLoad returned.
func (l *BoltLoad) Commits() (int64, error) {
	id, err := l.txid()
	return int64(id - l.txid0), err
}

// txid returns the id of the last committed write transaction.
func (l *BoltLoad) txid() (int, error) {
	var id int
	err := l.db.View(func(tx *bolt.Tx) error {
		id = tx.ID()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("bolt load: %w", err)
	}
	return id, nil
}

// Close closes the file; call it once no Op is running.
func (l *BoltLoad) Close() error { return l.db.Close() }

// RecordValue returns a value shaped and sized like the journal record
// persist stores for a command accepted with tok.
func RecordValue(tok string) []byte {
	return fmt.Appendf(nil, `{"state":"accepted","token":%q,"accepted_at":1767225600000,"order":1000}`, tok)
}
