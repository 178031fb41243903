package lease

import "context"

// Store keeps the controller's durable state: the epoch and one Record per
// fencing domain. It is the controller's only persistence and is kept small
// so that a replicated implementation (etcd) can follow the bbolt one.
// Methods are safe for concurrent use.
type Store interface {
	// Epoch returns the store's epoch: fixed when the store was created
	// and raised only by an explicit restore command. It is > 0.
	Epoch(ctx context.Context) (uint64, error)
	// Load returns domain's record; a domain never written has the zero
	// Record (Version 0).
	Load(ctx context.Context, domain string) (Record, error)
	// Put atomically replaces domain's record by rec if the stored record
	// still has rec.Version, and makes it durable (fsync or quorum) before
	// returning the stored record with its new, larger Version. A record
	// changed since it was loaded gives an error wrapping ErrConflict and
	// writes nothing. ctx bounds only the wait to be queued; once queued,
	// Put waits for the outcome so a durable write is never reported failed.
	Put(ctx context.Context, domain string, rec Record) (Record, error)
	// Close waits for queued writes and releases the store.
	Close() error
}

// Scanner is implemented by a Store that can list its records, which the
// controller needs to re-announce every stored lease at start
// (Controller.LiveLeases). Scan calls fn with each domain and its record,
// in no particular order, until fn returns false; fn must not call the
// Store. Safe for concurrent use with the other methods.
type Scanner interface {
	Scan(ctx context.Context, fn func(domain string, rec Record) bool) error
}

// Record is the durable state of one fencing domain. The record of a domain
// is never deleted: it carries the seq high-water mark.
type Record struct {
	// Version is the store's revision of the record, set by Put; 0 means
	// the domain was never written.
	Version uint64 `json:"version"`
	// Seq is the highest seq ever issued in the domain. It never decreases
	// and survives release of the lease.
	Seq uint64 `json:"seq"`
	// Lease is the current lease, nil once released. An expired lease stays
	// here until the next acquire replaces it.
	Lease *LeaseRecord `json:"lease,omitempty"`
	// Requests are the recent acquire request ids, oldest first, kept for
	// idempotent retries (see retention in acquire.go). Their Seqs ascend
	// strictly (each is its grant's own seq), and an entry is never
	// changed once stored, only dropped: a store may keep the entries
	// apart from the record and write only the ones a Put adds or drops
	// (boltstore does), so a grant costs the same however many are kept.
	Requests []RequestRecord `json:"requests,omitempty"`
}

// LeaseRecord is a granted lease.
type LeaseRecord struct {
	Token     string `json:"token"` // signed wire form, returned again by renew
	Epoch     uint64 `json:"epoch"`
	Seq       uint64 `json:"seq"`
	Holder    string `json:"holder"`
	RequestID string `json:"request_id"`
	// TTLms is the lease's current time to live: the grant's, or the last
	// renewal's if it asked for another.
	TTLms uint64 `json:"ttl_ms"`
}

// RequestRecord remembers one granted acquire request.
type RequestRecord struct {
	ID     string `json:"id"`
	Holder string `json:"holder"`
	Seq    uint64 `json:"seq"`
	// AtMs is the wall-clock grant time in Unix ms and TTLms the grant's
	// TTL; together they bound retention only, never expiry.
	AtMs  int64  `json:"at_ms"`
	TTLms uint64 `json:"ttl_ms"`
}

// clone returns a deep copy of r that Put may be given while r stays as
// the controller's view of the committed state.
func (r Record) clone() Record {
	c := r
	if r.Lease != nil {
		l := *r.Lease
		c.Lease = &l
	}
	c.Requests = append([]RequestRecord(nil), r.Requests...)
	return c
}

// findRequest returns the remembered request with id, if any.
func (r Record) findRequest(id string) (RequestRecord, bool) {
	for _, q := range r.Requests {
		if q.ID == id {
			return q, true
		}
	}
	return RequestRecord{}, false
}

// Shared is implemented by a Store that several controllers use at once
// (etcd): every replica must see what the others wrote. With a Shared
// store the controller
//
//   - re-reads a domain's record (linearizably) at the start of every
//     operation, so a replica's answer reflects the other replicas' grants,
//     renewals and releases;
//   - counts a lease from the moment it first read that record version on
//     its own monotonic clock: the write happened before that read, so the
//     lease never expires on a replica before its holder (counting from its
//     request) expects it to; no wall clocks are compared;
//   - stores every renewal (a new record version), so the other replicas
//     restart their count too;
//   - retries an operation that lost a compare-and-put race (ErrConflict)
//     against the fresh record, a bounded number of times.
//
// Put's compare on the record version is what makes replicas safe: a
// replica acting on an outdated view (a grant after an expiry that a
// renewal elsewhere cancelled) conflicts and writes nothing.
type Shared interface {
	Store
	// Shared reports whether the store is shared; a Store whose Shared
	// returns false is treated like one that does not implement Shared.
	Shared() bool
}

// isShared reports whether s is a Shared store.
func isShared(s Store) bool {
	sh, ok := s.(Shared)
	return ok && sh.Shared()
}
