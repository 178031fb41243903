package groupcommit

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// A recorder collects one batch's writes as a log payload: a sequence of
// writes, each a kind byte, then the bucket name, the key and (for a put)
// the value, each preceded by its length as a uvarint. A nil recorder
// records nothing.
type recorder struct {
	buf    []byte
	writes int
}

const (
	writePut          byte = 1
	writeDelete       byte = 2
	writeCreateBucket byte = 3
)

func (r *recorder) reset() { r.buf, r.writes = r.buf[:0], 0 }

func (r *recorder) put(bucket, key, value []byte) {
	if r != nil {
		r.add(writePut, bucket, key, value)
	}
}

func (r *recorder) delete(bucket, key []byte) {
	if r != nil {
		r.add(writeDelete, bucket, key)
	}
}

func (r *recorder) createBucket(bucket []byte) {
	if r != nil {
		r.add(writeCreateBucket, bucket)
	}
}

func (r *recorder) add(kind byte, fields ...[]byte) {
	r.buf = append(r.buf, kind)
	for _, f := range fields {
		r.buf = binary.AppendUvarint(r.buf, uint64(len(f)))
		r.buf = append(r.buf, f...)
	}
	r.writes++
}

// applyWrites replays a recorded payload into tx.
func applyWrites(tx *bolt.Tx, payload []byte) error {
	return eachWrite(payload, func(kind byte, bucket, key, value []byte) error {
		return applyWrite(tx, kind, bucket, key, value)
	})
}

// each calls fn for every put (value set) and delete (value nil) recorded.
func (r *recorder) each(fn func(bucket, key, value []byte)) {
	_ = eachWrite(r.buf, func(kind byte, bucket, key, value []byte) error {
		switch kind {
		case writePut:
			if value == nil {
				value = []byte{}
			}
			fn(bucket, key, value)
		case writeDelete:
			fn(bucket, key, nil)
		}
		return nil
	})
}

// eachWrite decodes a payload and calls fn for each write in it.
func eachWrite(payload []byte, fn func(kind byte, bucket, key, value []byte) error) error {
	for len(payload) > 0 {
		kind := payload[0]
		payload = payload[1:]
		fields := 2
		switch kind {
		case writePut:
			fields = 3
		case writeDelete:
		case writeCreateBucket:
			fields = 1
		default:
			return fmt.Errorf("write kind %d", kind)
		}
		var f [3][]byte
		for i := range fields {
			n, used := binary.Uvarint(payload)
			if used <= 0 || n > uint64(len(payload)-used) {
				return fmt.Errorf("truncated write")
			}
			f[i], payload = payload[used:used+int(n)], payload[used+int(n):]
		}
		if err := fn(kind, f[0], f[1], f[2]); err != nil {
			return err
		}
	}
	return nil
}

func applyWrite(tx *bolt.Tx, kind byte, bucket, key, value []byte) error {
	if kind == writeCreateBucket {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}
	b := tx.Bucket(bucket)
	if b == nil {
		return fmt.Errorf("no bucket %q", bucket)
	}
	if kind == writeDelete {
		return b.Delete(key)
	}
	return b.Put(key, value)
}
