package persist

import (
	"bytes"
	"sync"

	"github.com/fencegate/fencegate/internal/groupcommit"
)

// durableFences is the store's copy of every domain's durable fence, so
// that the check just before a device (DomainFence, once per command)
// reads memory instead of waiting for the batch being written. Open loads
// it; the writer updates it from every batch's writes to the domains
// bucket once the batch is durable and before its callers are released
// (groupcommit's OnDurable), so it holds exactly what the file and its
// log hold. A stored value that does not decode is kept as its error.
type durableFences struct {
	mu sync.RWMutex
	m  map[string]durableFence
}

type durableFence struct {
	f   Fence
	err error
}

// load reads every domain fence in tx.
func (d *durableFences) load(tx *groupcommit.Tx) error {
	m := make(map[string]durableFence)
	err := tx.Bucket(bucketDomains).ForEach(func(k, v []byte) error {
		f, err := decodeFence(domainSlot(string(k)), v)
		m[string(k)] = durableFence{f: f, err: err}
		return nil
	})
	d.mu.Lock()
	d.m = m
	d.mu.Unlock()
	return err
}

// onDurable follows one durable write (groupcommit.CommitterOptions.OnDurable).
func (d *durableFences) onDurable(bucket, key, value []byte) {
	if !bytes.Equal(bucket, bucketDomains) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if value == nil {
		delete(d.m, string(key))
		return
	}
	f, err := decodeFence(domainSlot(string(key)), value)
	d.m[string(key)] = durableFence{f: f, err: err}
}

// get returns domain's durable fence (zero if it has none).
func (d *durableFences) get(domain string) (Fence, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	e := d.m[domain]
	return e.f, e.err
}
