package persist

import (
	"bytes"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/groupcommit"
)

func (s *Store) view(fn func(tx *groupcommit.Tx) error) error { return s.w.View(fn) }

// Lookup returns the journal record of a command, and whether there is one.
func (s *Store) Lookup(device, id string) (Record, bool, error) {
	var (
		r  Record
		ok bool
	)
	err := s.view(func(tx *groupcommit.Tx) error {
		var err error
		r, ok, err = journalFor(tx, device).get(id)
		return err
	})
	return r, ok, err
}

// Fences returns every device's record of its highest accepted token, by
// device (for status; the fence that decides is the domain's).
func (s *Store) Fences() (map[string]Fence, error) { return s.readFences(bucketFences) }

// readFences returns every fence stored in bucket, by key.
func (s *Store) readFences(bucket []byte) (map[string]Fence, error) {
	out := make(map[string]Fence)
	slot := deviceSlot
	if bytes.Equal(bucket, bucketDomains) {
		slot = domainSlot
	}
	err := s.view(func(tx *groupcommit.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			f, err := decodeFence(slot(string(k)), v)
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
	err := s.view(func(tx *groupcommit.Tx) error {
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

// DomainFences returns every fencing domain's fence: the highest token
// accepted for any of its devices or raised by a grant, by domain.
func (s *Store) DomainFences() (map[string]Fence, error) { return s.readFences(bucketDomains) }

// DomainFence returns the durable fence of one domain (zero Token if it has
// none). It reads durable state only: a raise whose Accept or Raise has
// returned is seen, one still queued is not. It does not wait for the
// batch being written (see durableFences).
func (s *Store) DomainFence(domain string) (fence.Token, error) {
	if err := s.w.Usable(); err != nil {
		return fence.Token{}, err
	}
	f, err := s.domains.get(domain)
	return f.Token, err
}
