package boltstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/internal/groupcommit"
	"github.com/fencegate/fencegate/lease"
)

// bucketRequests keeps each domain's remembered acquire requests
// (lease.Record.Requests) apart from its record, one key per request, so
// that a grant writes the request it adds and deletes the ones it drops
// instead of rewriting up to lease.MaxRequests of them: that rewrite was
// most of a grant's CPU and of the bytes it logged.
//
// Key: the domain's length (uvarint), the domain, the request's seq (8
// bytes, big-endian). A uvarint is prefix-free, so a domain's requests are
// one run of keys, in seq order, that no other domain's key can fall in.
// Value: the request's JSON (lease.RequestRecord). The run starts with the
// prefix alone as a key, whose value summarizes the requests after it
// (runSummary): with it a grant finds what to drop without reading every
// key.
var bucketRequests = []byte("requests")

// ErrRequestOrder: a Put whose record's requests do not ascend strictly by
// seq, which lease.Record promises and this layout's keys rely on.
var ErrRequestOrder = errors.New("boltstore: requests not in strictly ascending seq order")

// ErrEmptyDomain: a Put with an empty domain name, which has no key in
// bbolt; the Put changes nothing.
var ErrEmptyDomain = errors.New("boltstore: put: empty domain name")

// requestPrefix is the start of every key of domain's requests.
func requestPrefix(domain string) []byte {
	p := make([]byte, 0, binary.MaxVarintLen64+len(domain)+8)
	p = binary.AppendUvarint(p, uint64(len(domain)))
	return append(p, domain...)
}

// requestKey is the key of the request with seq under prefix.
func requestKey(prefix []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, len(prefix)+8), prefix...), seq)
}

// checkRequestOrder returns an error wrapping ErrRequestOrder unless reqs'
// seqs ascend strictly.
func checkRequestOrder(reqs []lease.RequestRecord) error {
	for i := 1; i < len(reqs); i++ {
		if reqs[i].Seq <= reqs[i-1].Seq {
			return fmt.Errorf("%w: request %q (seq %d) follows seq %d", ErrRequestOrder, reqs[i].ID, reqs[i].Seq, reqs[i-1].Seq)
		}
	}
	return nil
}

// storedRequestSeqs returns the seqs of the requests stored under prefix,
// ascending, reading keys only.
func storedRequestSeqs(b *groupcommit.Bucket, prefix []byte) ([]uint64, error) {
	var seqs []uint64
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) == len(prefix) {
			continue // the summary
		}
		seq, err := requestSeq(k, prefix)
		if err != nil {
			return nil, err
		}
		seqs = append(seqs, seq)
	}
	return seqs, nil
}

func requestSeq(k, prefix []byte) (uint64, error) {
	if len(k) != len(prefix)+8 {
		return 0, fmt.Errorf("%w: request key %x", lease.ErrCorrupt, k)
	}
	return binary.BigEndian.Uint64(k[len(prefix):]), nil
}

// syncRequests makes the requests stored under prefix exactly want (which
// ascends by seq), and their summary right: it puts each request of want
// not stored yet and deletes each stored one want lacks. A request stored
// under a seq want also has is left as it is: an entry never changes once
// stored (lease.Record).
//
// A grant's Put adds requests above every stored seq and drops a few, the
// oldest mostly; so syncRequests reads the summary and the top stored
// seq, takes want's requests above the top as the new ones, and walks the
// stored ones from the bottom only until it has found as many drops as
// the count implies. The summary's digest then proves that the rest of
// want is what is stored. Whatever does not add up falls back to reading
// every key (syncAll), which is right for any want. Both paths run in the
// store's single writer: the two SHA-256 of at most 2 KiB each cost a
// grant about 5 µs of its 70–160 (crypto/sha256's Hash1K benchmark: 1.2
// µs per KiB on the reference machine).
func syncRequests(b *groupcommit.Bucket, prefix []byte, want []lease.RequestRecord) error {
	stored, top, err := requestRun(b, prefix)
	if err != nil {
		return err
	}
	kept := 0
	for stored.count > 0 && kept < len(want) && want[kept].Seq <= top {
		kept++
	}
	drops, ok := dropsFromBottom(b, prefix, want[:kept], int(stored.count)-kept)
	if !ok || summaryWith(want[:kept], drops) != stored {
		return syncAll(b, prefix, want)
	}
	for _, seq := range drops {
		if err := b.Delete(requestKey(prefix, seq)); err != nil {
			return err
		}
	}
	for _, q := range want[kept:] {
		if err := b.Put(requestKey(prefix, q.Seq), q.AppendJSON(nil)); err != nil {
			return err
		}
	}
	return putSummary(b, prefix, stored, summaryOf(want))
}

// runSummary is the value of the key that starts a domain's run: the
// number of requests stored after it and the SHA-256 of their seqs in
// ascending order (8 bytes each, big-endian). A set of seqs other than the
// stored one matches it only by finding a SHA-256 collision, so a Put may
// take a match as proof of what is stored. (A sum of mixed seqs, the first
// summary, was cheaper to keep up but could be matched by a set built for
// it: attack 21.)
type runSummary struct {
	count  uint64
	digest [sha256.Size]byte
}

const summarySize = 8 + sha256.Size

// summaryOf returns the summary of reqs (ascending); of none, the zero
// summary, as requestRun returns when no key is stored.
func summaryOf(reqs []lease.RequestRecord) runSummary {
	if len(reqs) == 0 {
		return runSummary{}
	}
	buf := make([]byte, 0, 8*len(reqs))
	for _, q := range reqs {
		buf = binary.BigEndian.AppendUint64(buf, q.Seq)
	}
	return runSummary{count: uint64(len(reqs)), digest: sha256.Sum256(buf)}
}

// summaryWith returns the summary of kept and drops merged, both
// ascending: the stored run a fast-path Put believes it found.
func summaryWith(kept []lease.RequestRecord, drops []uint64) runSummary {
	if len(kept)+len(drops) == 0 {
		return runSummary{}
	}
	buf := make([]byte, 0, 8*(len(kept)+len(drops)))
	i := 0
	for _, q := range kept {
		for ; i < len(drops) && drops[i] < q.Seq; i++ {
			buf = binary.BigEndian.AppendUint64(buf, drops[i])
		}
		buf = binary.BigEndian.AppendUint64(buf, q.Seq)
	}
	for ; i < len(drops); i++ {
		buf = binary.BigEndian.AppendUint64(buf, drops[i])
	}
	return runSummary{count: uint64(len(kept) + len(drops)), digest: sha256.Sum256(buf)}
}

func (s runSummary) encode() []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, summarySize), s.count), s.digest[:]...)
}

// requestRun returns the summary of the requests under prefix and the top
// stored seq (zero values when there are none).
func requestRun(b *groupcommit.Bucket, prefix []byte) (runSummary, uint64, error) {
	c := b.Cursor()
	k, v := c.Seek(prefix)
	if !bytes.Equal(k, prefix) {
		return runSummary{}, 0, nil
	}
	if len(v) != summarySize || binary.BigEndian.Uint64(v) == 0 || binary.BigEndian.Uint64(v) > math.MaxInt32 {
		return runSummary{}, 0, fmt.Errorf("%w: request summary %x under %x", lease.ErrCorrupt, v, prefix)
	}
	s := runSummary{count: binary.BigEndian.Uint64(v)}
	copy(s.digest[:], v[8:])
	end := requestKey(prefix, math.MaxUint64)
	if k, _ = c.Seek(end); !bytes.Equal(k, end) {
		if k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
	}
	if bytes.Equal(k, prefix) {
		return runSummary{}, 0, fmt.Errorf("%w: request summary under %x counts %d, none stored", lease.ErrCorrupt, prefix, s.count)
	}
	top, err := requestSeq(k, prefix)
	return s, top, err
}

// dropsFromBottom walks the stored requests under prefix from the bottom
// and returns the seqs of the first ndrops that kept lacks (kept: want's
// requests at or below the top, ascending). It reports false if the walk
// does not add up: ndrops < 0, a request of kept that is not stored, or
// fewer drops than ndrops before the run ends.
func dropsFromBottom(b *groupcommit.Bucket, prefix []byte, kept []lease.RequestRecord, ndrops int) ([]uint64, bool) {
	if ndrops <= 0 {
		return nil, ndrops == 0
	}
	var drops []uint64
	c := b.Cursor()
	c.Seek(prefix) // the summary
	i := 0
	for k, _ := c.Next(); k != nil && bytes.HasPrefix(k, prefix) && len(drops) < ndrops; k, _ = c.Next() {
		seq, err := requestSeq(k, prefix)
		switch {
		case err != nil, i < len(kept) && kept[i].Seq < seq:
			return nil, false // kept[i] is not stored
		case i < len(kept) && kept[i].Seq == seq:
			i++
		default:
			drops = append(drops, seq)
		}
	}
	return drops, len(drops) == ndrops
}

// putSummary stores s as the summary of the requests under prefix (no key
// for none), unless it is was, the stored one.
func putSummary(b *groupcommit.Bucket, prefix []byte, was, s runSummary) error {
	switch {
	case s == was:
		return nil
	case s.count == 0:
		return b.Delete(prefix)
	}
	return b.Put(prefix, s.encode())
}

// syncAll is syncRequests by reading every key under prefix: it merges the
// stored seqs with want's.
func syncAll(b *groupcommit.Bucket, prefix []byte, want []lease.RequestRecord) error {
	stored, err := storedRequestSeqs(b, prefix)
	if err != nil {
		return err
	}
	i := 0
	for _, seq := range stored {
		for ; i < len(want) && want[i].Seq < seq; i++ {
			if err := b.Put(requestKey(prefix, want[i].Seq), want[i].AppendJSON(nil)); err != nil {
				return err
			}
		}
		if i < len(want) && want[i].Seq == seq {
			i++
			continue
		}
		if err := b.Delete(requestKey(prefix, seq)); err != nil {
			return err
		}
	}
	for ; i < len(want); i++ {
		if err := b.Put(requestKey(prefix, want[i].Seq), want[i].AppendJSON(nil)); err != nil {
			return err
		}
	}
	return putSummary(b, prefix, runSummary{count: math.MaxUint64}, summaryOf(want))
}

// loadRequests decodes the requests stored under prefix, ascending by seq.
// A key or value that is not as syncRequests writes it, or requests that
// do not match their summary, is lease.ErrCorrupt.
func loadRequests(b *groupcommit.Bucket, prefix []byte, domain string) ([]lease.RequestRecord, error) {
	sum, _, err := requestRun(b, prefix)
	if err != nil {
		return nil, err
	}
	var out []lease.RequestRecord
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(k) == len(prefix) {
			continue // the summary
		}
		seq, err := requestSeq(k, prefix)
		if err != nil {
			return nil, err
		}
		var q lease.RequestRecord
		if err := json.Unmarshal(v, &q); err != nil {
			return nil, fmt.Errorf("%w: domain %q: request seq %d: %w", lease.ErrCorrupt, domain, seq, err)
		}
		if q.Seq != seq {
			return nil, fmt.Errorf("%w: domain %q: request under seq %d says seq %d", lease.ErrCorrupt, domain, seq, q.Seq)
		}
		out = append(out, q)
	}
	if summaryOf(out) != sum {
		return nil, fmt.Errorf("%w: domain %q: %d requests stored do not match their summary (%d)", lease.ErrCorrupt, domain, len(out), sum.count)
	}
	return out, nil
}

// moveRequestsOut turns a schema 1 file, whose records carry their
// requests, into the schema 2 layout: each record's requests go to
// bucketRequests and the record is rewritten without them. It runs in the
// transaction that stores the new schema, so a file is wholly one or the
// other.
func moveRequestsOut(tx *bolt.Tx) error {
	domains, reqs := tx.Bucket(bucketDomains), tx.Bucket(bucketRequests)
	carrying := map[string]lease.Record{}
	err := domains.ForEach(func(k, v []byte) error {
		var rec lease.Record
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("%w: domain %q: %w", lease.ErrCorrupt, k, err)
		}
		if err := checkRequestOrder(rec.Requests); err != nil {
			return fmt.Errorf("%w: domain %q: %w", lease.ErrCorrupt, k, err)
		}
		if len(rec.Requests) > 0 {
			carrying[string(k)] = rec
		}
		return nil
	})
	if err != nil {
		return err
	}
	for domain, rec := range carrying { // bbolt forbids writes inside ForEach
		prefix := requestPrefix(domain)
		for _, q := range rec.Requests {
			if err := reqs.Put(requestKey(prefix, q.Seq), q.AppendJSON(nil)); err != nil {
				return err
			}
		}
		if err := reqs.Put(prefix, summaryOf(rec.Requests).encode()); err != nil {
			return err
		}
		rec.Requests = nil
		if err := domains.Put([]byte(domain), rec.AppendJSON(nil)); err != nil {
			return err
		}
	}
	return nil
}
