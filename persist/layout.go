package persist

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/internal/groupcommit"
)

// File layout: a few flat buckets shared by all devices, keyed by
// "<device>\x00<…>" (device ids never contain NUL). Sharing the buckets keeps
// the pages a group commit dirties low when many devices write at once: a
// command dirties about one journal leaf and one order leaf of its device,
// while the pending and fences buckets stay a page or two for everyone.
//
//	meta     "schema" → "1"
//	domains  domain → fenceJSON (the fence: highest token accepted for any
//	         device of the domain, or raised by a grant)
//	fences   device → fenceJSON (highest token accepted for the device; status)
//	journal  device NUL id → recordJSON
//	order    device NUL big-endian uint64 n → 8-byte store-clock stamp (ms) + id
//	pending  device NUL id → "" while the command is accepted without result
//
// A device's order numbers only grow and are only removed from the front
// (pruning), so first..last is contiguous and last-first+1 is its count.
var (
	bucketMeta    = []byte("meta")
	bucketFences  = []byte("fences")
	bucketDomains = []byte("domains")
	bucketJournal = []byte("journal")
	bucketOrder   = []byte("order")
	bucketPending = []byte("pending")
	keySchema     = []byte("schema")
	schemaVersion = []byte("2")
	// schemaV1 is the layout before per-domain fences and the store clock:
	// no domains bucket, wall-clock stamps in the order index. Open migrates it.
	schemaV1 = []byte("1")
)

// journal is one device's view of the shared journal buckets inside a
// transaction.
type journal struct {
	prefix              []byte // device NUL
	ids, order, pending *groupcommit.Bucket
	device              string
}

func journalFor(tx *groupcommit.Tx, device string) journal {
	return journal{prefix: append([]byte(device), 0), device: device,
		ids: tx.Bucket(bucketJournal), order: tx.Bucket(bucketOrder), pending: tx.Bucket(bucketPending)}
}

func (j journal) key(suffix []byte) []byte {
	return append(append(make([]byte, 0, len(j.prefix)+len(suffix)), j.prefix...), suffix...)
}

func (j journal) get(id string) (Record, bool, error) {
	v := j.ids.Get(j.key([]byte(id)))
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
		r.order = j.lastOrder() + 1
		if err := j.order.Put(j.key(orderKey(r.order)), orderValue(r)); err != nil {
			return fmt.Errorf("journal order: %w", err)
		}
	}
	v, err := encodeRecord(r)
	if err != nil {
		return fmt.Errorf("journal %q: %w", r.ID, err)
	}
	id := j.key([]byte(r.ID))
	if err := j.ids.Put(id, v); err != nil {
		return fmt.Errorf("journal %q: %w", r.ID, err)
	}
	if r.State == StateAccepted {
		err = j.pending.Put(id, indexMark)
	} else {
		err = j.pending.Delete(id)
	}
	if err != nil {
		return fmt.Errorf("journal pending %q: %w", r.ID, err)
	}
	return nil
}

// orderBounds returns the device's last and first order numbers (0, 0 if
// it has none).
func (j journal) orderBounds() (last, first uint64) {
	k, _ := j.order.Cursor().Seek(j.prefix)
	if k == nil || !bytes.HasPrefix(k, j.prefix) {
		return 0, 0
	}
	return j.lastOrder(), binary.BigEndian.Uint64(k[len(j.prefix):])
}

// lastOrder returns the device's last order number (0 if it has none):
// the entry just before the first key past the device's prefix.
func (j journal) lastOrder() uint64 {
	c := j.order.Cursor()
	end := append(append([]byte(nil), j.prefix[:len(j.prefix)-1]...), 1) // device "\x01": just past the prefix
	k, _ := c.Seek(end)
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, j.prefix) {
		return 0
	}
	return binary.BigEndian.Uint64(k[len(j.prefix):])
}

// forEach calls fn with each of the device's order entries, oldest first,
// with the store-clock stamp of its acceptance.
func (j journal) forEach(fn func(stamp time.Time, id string) error) error {
	c := j.order.Cursor()
	for k, v := c.Seek(j.prefix); k != nil && bytes.HasPrefix(k, j.prefix); k, v = c.Next() {
		at, id := splitOrderValue(v)
		if err := fn(at, id); err != nil {
			return err
		}
	}
	return nil
}

func (j journal) isPending(id string) bool { return has(j.pending, j.key([]byte(id))) }

// indexMark is the value of the index buckets' entries (pending, indoubt):
// presence is all they say. It is not empty because bbolt's Get returns
// nil for an empty value put in the same transaction — a command accepted,
// or marked in doubt, in the batch that prunes would look absent. Entries
// written empty by older versions are read from the file, where Get
// returns them as empty, not nil.
var indexMark = []byte{1}

// has reports whether the index bucket b holds key.
func has(b *groupcommit.Bucket, key []byte) bool { return b.Get(key) != nil }

func orderKey(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

func orderValue(r Record) []byte {
	v := binary.BigEndian.AppendUint64(nil, uint64(r.stamp.UnixMilli()))
	return append(v, r.ID...)
}

func splitOrderValue(v []byte) (time.Time, string) {
	if len(v) < 8 {
		return time.Time{}, ""
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(v))), string(v[8:])
}

// splitDeviceKey splits "device NUL rest".
func splitDeviceKey(k []byte) (device, rest string, ok bool) {
	i := bytes.IndexByte(k, 0)
	if i < 0 {
		return "", "", false
	}
	return string(k[:i]), string(k[i+1:]), true
}

func getFence(tx *groupcommit.Tx, device string) (Fence, bool, error) {
	v := tx.Bucket(bucketFences).Get([]byte(device))
	if v == nil {
		return Fence{}, false, nil
	}
	f, err := decodeFence(deviceSlot(device), v)
	return f, err == nil, err
}

func putFence(tx *groupcommit.Tx, device string, f Fence) error {
	v, err := encodeFence(deviceSlot(device), f)
	if err != nil {
		return fmt.Errorf("fence %q: %w", device, err)
	}
	if err := tx.Bucket(bucketFences).Put([]byte(device), v); err != nil {
		return fmt.Errorf("fence %q: %w", device, err)
	}
	return nil
}

// lastStamp is the store-clock stamp of the device's newest order entry
// (zero time if it has none).
func (j journal) lastStamp() time.Time {
	last := j.lastOrder()
	if last == 0 {
		return time.Time{}
	}
	at, _ := splitOrderValue(j.order.Get(j.key(orderKey(last))))
	return at
}

func getDomainFence(tx *groupcommit.Tx, domain string) (Fence, bool, error) {
	v := tx.Bucket(bucketDomains).Get([]byte(domain))
	if v == nil {
		return Fence{}, false, nil
	}
	f, err := decodeFence(domainSlot(domain), v)
	return f, err == nil, err
}

func putDomainFence(tx *groupcommit.Tx, domain string, f Fence) error {
	v, err := encodeFence(domainSlot(domain), f)
	if err != nil {
		return fmt.Errorf("domain fence %q: %w", domain, err)
	}
	if err := tx.Bucket(bucketDomains).Put([]byte(domain), v); err != nil {
		return fmt.Errorf("domain fence %q: %w", domain, err)
	}
	return nil
}

// migrateDomainFences raises each domain's fence to the highest device
// fence of the domain: files written before fences were per domain had
// only device fences.
func migrateDomainFences(tx *groupcommit.Tx) error {
	return tx.Bucket(bucketFences).ForEach(func(k, v []byte) error {
		f, err := decodeFence(deviceSlot(string(k)), v)
		if err != nil {
			return err
		}
		cur, _, err := getDomainFence(tx, f.Token.Domain)
		if err != nil {
			return err
		}
		if cmp, _ := f.Token.Compare(cur.Token); cur.Token.IsZero() || cmp > 0 {
			return putDomainFence(tx, f.Token.Domain, f)
		}
		return nil
	})
}

// initLayout creates the buckets of a new file, checks the schema of an
// existing one and migrates a schema-1 file (see migrateV1); migrated
// reports that it did.
func initLayout(tx *groupcommit.Tx) (migrated bool, err error) {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return false, fmt.Errorf("init: %w", err)
	}
	v := meta.Get(keySchema)
	switch {
	case v == nil, bytes.Equal(v, schemaVersion), bytes.Equal(v, schemaV1):
	default:
		return false, fmt.Errorf("%w: schema %q, this build reads %q and %q", ErrCorrupt, v, schemaVersion, schemaV1)
	}
	for _, name := range [][]byte{bucketFences, bucketDomains, bucketJournal, bucketOrder, bucketPending} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return false, fmt.Errorf("init: %w", err)
		}
	}
	if bytes.Equal(v, schemaV1) {
		if err := migrateV1(tx); err != nil {
			return false, fmt.Errorf("migrate schema 1: %w", err)
		}
	}
	if err := meta.Put(keySchema, schemaVersion); err != nil {
		return false, fmt.Errorf("init: %w", err)
	}
	return bytes.Equal(v, schemaV1), nil
}

// migrateV1 turns a schema-1 file into schema 2: each domain's fence is
// raised to the highest device fence of the domain, and every order stamp —
// a wall-clock time in schema 1, possibly from a stepped clock — is set to
// one common stamp, zero, so that no record looks older than another and
// the new store clock starts from there: retention restarts for the old
// records, the dedupe window can only grow.
func migrateV1(tx *groupcommit.Tx) error {
	if err := migrateDomainFences(tx); err != nil {
		return err
	}
	order := tx.Bucket(bucketOrder)
	var keys, vals [][]byte
	err := order.ForEach(func(k, v []byte) error {
		if len(v) >= 8 {
			nv := append(make([]byte, 8, len(v)), v[8:]...) // stamp 0, same id
			keys, vals = append(keys, append([]byte(nil), k...)), append(vals, nv)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, k := range keys {
		if err := order.Put(k, vals[i]); err != nil {
			return err
		}
	}
	return nil
}

// fencedDevices lists every device with a fence; every device with a
// journal has one (Accept raises or keeps the fence before journaling).
func fencedDevices(tx *groupcommit.Tx) []string {
	var devices []string
	_ = tx.Bucket(bucketFences).ForEach(func(k, _ []byte) error {
		devices = append(devices, string(k))
		return nil
	})
	return devices
}
