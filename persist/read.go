package persist

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

func (s *Store) view(fn func(tx *bolt.Tx) error) error { return s.w.View(fn) }

// Lookup returns the journal record of a command, and whether there is one.
func (s *Store) Lookup(device, id string) (Record, bool, error) {
	var (
		r  Record
		ok bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		r, ok, err = journalFor(tx, device).get(id)
		return err
	})
	return r, ok, err
}

// Fences returns every device's fence (highest accepted token), by device.
func (s *Store) Fences() (map[string]Fence, error) {
	out := make(map[string]Fence)
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketFences).ForEach(func(k, v []byte) error {
			f, err := decodeFence(string(k), v)
			if err != nil {
				return err
			}
			out[string(k)] = f
			return nil
		})
	})
	return out, err
}

// Journal returns a device's journal records, oldest first.
func (s *Store) Journal(device string) ([]Record, error) {
	var out []Record
	err := s.view(func(tx *bolt.Tx) error {
		j := journalFor(tx, device)
		return j.forEach(func(_ time.Time, id string) error {
			r, ok, err := j.get(id)
			if err == nil && ok {
				out = append(out, r)
			}
			return err
		})
	})
	return out, err
}
