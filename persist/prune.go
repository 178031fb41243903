package persist

import (
	"context"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// Prune applies the journal retention to every device (at most a bounded
// number of records per device per call) and returns once that is durable.
// The writer also prunes each device its batches touch, so calling Prune
// matters only for devices that receive no commands for a long time.
func (s *Store) Prune(ctx context.Context) error {
	return s.w.Submit(ctx, "", func(tx *bolt.Tx) (bool, error) {
		devices, err := journalDevices(tx)
		if err != nil {
			return false, err
		}
		return s.pruneDevices(tx, devices)
	})
}

// pruneDevices prunes each device's journal; it is the Committer's
// AfterBatch, run for the devices a batch touched.
func (s *Store) pruneDevices(tx *bolt.Tx, devices []string) (bool, error) {
	var pruned bool
	for _, d := range devices {
		n, err := s.pruneDevice(tx, d)
		if err != nil {
			return false, err
		}
		pruned = pruned || n > 0
	}
	return pruned, nil
}

// pruneDevice removes a device's oldest journal records while there are more
// than MaxRecords or the oldest is older than MaxAge, up to pruneBudget
// records. It stops at a record still waiting for its result.
func (s *Store) pruneDevice(tx *bolt.Tx, device string) (int, error) {
	j, err := journalFor(tx, device, false)
	if err != nil || !j.exists() {
		return 0, err
	}
	c := j.order.Cursor()
	last, _ := c.Last()
	cutoff := s.cutoff()
	n := 0
	for ; n < pruneBudget; n++ {
		k, v := c.First()
		if k == nil {
			break
		}
		id := append([]byte(nil), v...) // v is only valid until the cursor moves
		count := binary.BigEndian.Uint64(last) - binary.BigEndian.Uint64(k) + 1
		r, ok, err := j.get(string(id))
		if err != nil {
			return n, err
		}
		tooMany := count > uint64(s.opts.MaxRecords)
		if ok && (r.State == StateAccepted || (!tooMany && !r.AcceptedAt.Before(cutoff))) {
			break
		}
		if err := c.Delete(); err != nil {
			return n, err
		}
		if err := j.ids.Delete(id); err != nil {
			return n, err
		}
	}
	return n, nil
}
