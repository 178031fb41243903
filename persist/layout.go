package persist

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// File layout (bbolt buckets):
//
//	meta                     "schema" → "1"
//	fences                   device → fenceJSON (highest accepted token)
//	journal/<device>/ids     command id → recordJSON
//	journal/<device>/order   big-endian uint64 order → command id (oldest first)
//	journal/<device>/pending command id → "" while the command is accepted
//
// order keys come from the order bucket's sequence and are only ever removed
// from the front (pruning), so first..last is contiguous and last-first+1 is
// the record count.
var (
	bucketMeta    = []byte("meta")
	bucketFences  = []byte("fences")
	bucketJournal = []byte("journal")
	bucketIDs     = []byte("ids")
	bucketOrder   = []byte("order")
	bucketPending = []byte("pending")
	keySchema     = []byte("schema")
	schemaVersion = []byte("1")
)

// journal is one device's journal buckets inside a transaction.
type journal struct {
	ids, order, pending *bolt.Bucket
}

// journalFor returns device's journal buckets, or nil ones if the device has
// none and create is false.
func journalFor(tx *bolt.Tx, device string, create bool) (journal, error) {
	root := tx.Bucket(bucketJournal)
	b := root.Bucket([]byte(device))
	if b == nil {
		if !create {
			return journal{}, nil
		}
		var err error
		if b, err = root.CreateBucket([]byte(device)); err != nil {
			return journal{}, fmt.Errorf("create journal %q: %w", device, err)
		}
		for _, name := range [][]byte{bucketIDs, bucketOrder, bucketPending} {
			if _, err := b.CreateBucket(name); err != nil {
				return journal{}, fmt.Errorf("create journal %q: %w", device, err)
			}
		}
	}
	return journal{ids: b.Bucket(bucketIDs), order: b.Bucket(bucketOrder), pending: b.Bucket(bucketPending)}, nil
}

func (j journal) exists() bool { return j.ids != nil }

func (j journal) get(id string) (Record, bool, error) {
	if !j.exists() {
		return Record{}, false, nil
	}
	v := j.ids.Get([]byte(id))
	if v == nil {
		return Record{}, false, nil
	}
	r, err := decodeRecord(id, v)
	return r, err == nil, err
}

// put stores r, giving it the next order position if it has none, and keeps
// the pending index in step with its state.
func (j journal) put(r Record) error {
	if r.order == 0 {
		seq, err := j.order.NextSequence()
		if err != nil {
			return fmt.Errorf("journal order: %w", err)
		}
		r.order = seq
		if err := j.order.Put(orderKey(seq), []byte(r.ID)); err != nil {
			return fmt.Errorf("journal order: %w", err)
		}
	}
	v, err := encodeRecord(r)
	if err != nil {
		return fmt.Errorf("journal %q: %w", r.ID, err)
	}
	if err := j.ids.Put([]byte(r.ID), v); err != nil {
		return fmt.Errorf("journal %q: %w", r.ID, err)
	}
	if r.State == StateAccepted {
		err = j.pending.Put([]byte(r.ID), nil)
	} else {
		err = j.pending.Delete([]byte(r.ID))
	}
	if err != nil {
		return fmt.Errorf("journal pending %q: %w", r.ID, err)
	}
	return nil
}

func orderKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func getFence(tx *bolt.Tx, device string) (Fence, bool, error) {
	v := tx.Bucket(bucketFences).Get([]byte(device))
	if v == nil {
		return Fence{}, false, nil
	}
	f, err := decodeFence(device, v)
	return f, err == nil, err
}

func putFence(tx *bolt.Tx, device string, f Fence) error {
	v, err := encodeFence(f)
	if err != nil {
		return fmt.Errorf("fence %q: %w", device, err)
	}
	if err := tx.Bucket(bucketFences).Put([]byte(device), v); err != nil {
		return fmt.Errorf("fence %q: %w", device, err)
	}
	return nil
}

// initLayout creates the top-level buckets of a new file and checks the
// schema of an existing one.
func initLayout(tx *bolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	switch v := meta.Get(keySchema); {
	case v == nil:
		if err := meta.Put(keySchema, schemaVersion); err != nil {
			return fmt.Errorf("init: %w", err)
		}
	case string(v) != string(schemaVersion):
		return fmt.Errorf("%w: schema %q, this build reads %q", ErrCorrupt, v, schemaVersion)
	}
	for _, name := range [][]byte{bucketFences, bucketJournal} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("init: %w", err)
		}
	}
	return nil
}
