package boltstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/fencegate/fencegate/internal/groupcommit"
	"github.com/fencegate/fencegate/lease"
)

// requestsDB opens a bbolt file at path with the requests bucket, for
// syncRequests run directly in a transaction.
func requestsDB(t *rapid.T, path string) *bolt.DB {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucketRequests); return err }); err != nil {
		t.Fatal(err)
	}
	return db
}

func syncInTx(t *rapid.T, db *bolt.DB, domain string, want []lease.RequestRecord) {
	err := db.Update(func(btx *bolt.Tx) error {
		return syncRequests(groupcommit.Wrap(btx).Bucket(bucketRequests), requestPrefix(domain), want)
	})
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
}

func loadInTx(t *rapid.T, db *bolt.DB, domain string) []lease.RequestRecord {
	var got []lease.RequestRecord
	err := db.View(func(btx *bolt.Tx) error {
		var err error
		got, err = loadRequests(groupcommit.Wrap(btx).Bucket(bucketRequests), requestPrefix(domain), domain)
		return err
	})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return got
}

// nextRequests draws the next request list of a domain from prev: some of
// prev's requests dropped (the oldest, or any), new ones added above
// every earlier seq (a grant), and, when lawless, also requests inserted
// below the top or under a seq that was dropped, which lease.Record rules
// out but syncRequests must still store exactly (its fallback).
func nextRequests(t *rapid.T, prev []lease.RequestRecord, top *uint64, lawless bool) []lease.RequestRecord {
	var next []lease.RequestRecord
	dropOldest := rapid.IntRange(0, len(prev)).Draw(t, "dropOldest")
	for i, q := range prev {
		if i >= dropOldest && !rapid.Bool().Draw(t, "dropAny") {
			next = append(next, q)
		}
	}
	if lawless {
		for range rapid.IntRange(0, 3).Draw(t, "inserted") {
			seq := rapid.Uint64Range(0, *top+1).Draw(t, "insertedSeq")
			next = append(next, lease.RequestRecord{ID: "ins", Holder: "h", Seq: seq, AtMs: 1, TTLms: 2})
		}
	}
	for range rapid.IntRange(0, 3).Draw(t, "added") {
		*top += rapid.Uint64Range(1, 1000).Draw(t, "step")
		next = append(next, lease.RequestRecord{ID: rapid.StringMatching(`[a-z0-9-]{1,12}`).Draw(t, "id"),
			Holder: "h", Seq: *top, AtMs: int64(*top), TTLms: 60000})
	}
	slices.SortStableFunc(next, func(a, b lease.RequestRecord) int { return cmpSeq(a.Seq, b.Seq) })
	next = slices.CompactFunc(next, func(a, b lease.RequestRecord) bool { return a.Seq == b.Seq })
	// An entry under a seq still stored keeps its stored content.
	for i, q := range next {
		if j := slices.IndexFunc(prev, func(p lease.RequestRecord) bool { return p.Seq == q.Seq }); j >= 0 {
			next[i] = prev[j]
		}
	}
	return next
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestSyncRequestsStoresExactlyWant runs random histories of two domains
// with neighbouring names through syncRequests and wants, after every
// step, each domain's stored requests to be exactly its list — for
// histories a controller writes (adds above the top, drops anywhere) and
// for lawless ones (inserts below the top) that only the fallback gets
// right.
func TestSyncRequestsStoresExactlyWant(t *testing.T) {
	dir, n := t.TempDir(), 0
	rapid.Check(t, func(t *rapid.T) {
		n++
		db := requestsDB(t, filepath.Join(dir, fmt.Sprint(n, ".db")))
		defer db.Close()
		lawless := rapid.Bool().Draw(t, "lawless")
		domains := []string{"d", "d\x00", "dd"}
		lists := make([][]lease.RequestRecord, len(domains))
		tops := make([]uint64, len(domains))
		for range rapid.IntRange(1, 25).Draw(t, "steps") {
			i := rapid.IntRange(0, len(domains)-1).Draw(t, "domain")
			lists[i] = nextRequests(t, lists[i], &tops[i], lawless)
			syncInTx(t, db, domains[i], lists[i])
			for j, d := range domains {
				if got := loadInTx(t, db, d); !reflect.DeepEqual(got, lists[j]) && !(len(got) == 0 && len(lists[j]) == 0) {
					t.Fatalf("domain %q: stored %v, want %v", d, got, lists[j])
				}
			}
		}
	})
}

// TestSchema1FileMovesItsRequestsOut opens a file in the schema 1 layout
// (requests inside each record, as the store wrote them before) and wants
// every record back whole, the requests in their own keys, the record
// rewritten without them, schema 2 stored, and the next grant-shaped Put
// and a reopen to keep it all.
func TestSchema1FileMovesItsRequestsOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	old := lease.Record{Version: 4, Seq: 9, Lease: &lease.LeaseRecord{Token: "fg1.a.b", Epoch: 5, Seq: 9, Holder: "alice", RequestID: "r9", TTLms: 1000},
		Requests: []lease.RequestRecord{{ID: "r3", Holder: "bob", Seq: 3, AtMs: 10, TTLms: 500}, {ID: "r9", Holder: "alice", Seq: 9, AtMs: 20, TTLms: 1000}}}
	bare := lease.Record{Version: 1, Seq: 2}
	writeSchema1(t, path, map[string]lease.Record{"pump": old, "valve": bare})

	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for domain, want := range map[string]lease.Record{"pump": old, "valve": bare} {
		got, err := st.Load(t.Context(), domain)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("load %s after the move: %+v, %v; want %+v", domain, got, err, want)
		}
	}
	next := old
	next.Seq = 10
	next.Requests = append(next.Requests[1:], lease.RequestRecord{ID: "r10", Holder: "carol", Seq: 10, AtMs: 30, TTLms: 1000})
	if _, err := st.Put(t.Context(), "pump", next); err != nil {
		t.Fatal(err)
	}
	st = reopenAfter(t, st, path, func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keySchema); string(v) != "2" {
			t.Errorf("schema %q after the move, want 2", v)
		}
		if v := tx.Bucket(bucketDomains).Get([]byte("pump")); bytes.Contains(v, []byte("requests")) {
			t.Errorf("record still carries its requests: %s", v)
		}
		if n := tx.Bucket(bucketRequests).Stats().KeyN; n != 3 { // pump's summary and two requests
			t.Errorf("%d request keys, want 3", n)
		}
		return nil
	})
	defer st.Close()
	next.Version++
	if got, err := st.Load(t.Context(), "pump"); err != nil || !reflect.DeepEqual(got, next) {
		t.Fatalf("load after reopen: %+v, %v; want %+v", got, err, next)
	}
}

// reopenAfter closes st, runs fn in an update transaction of the bare
// bbolt file at path (to look at it, or to change it behind the store's
// back), and opens the store again.
func reopenAfter(t *testing.T, st *Store, path string, fn func(tx *bolt.Tx) error) *Store {
	t.Helper()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(fn)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	st, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// writeSchema1 writes a lease store file as schema 1 did: meta (schema
// "1", an epoch) and each record's JSON with its requests in it.
func writeSchema1(t *testing.T, path string, recs map[string]lease.Record) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		domains, err := tx.CreateBucket(bucketDomains)
		if err != nil {
			return err
		}
		if err := errors.Join(meta.Put(keySchema, []byte("1")), meta.Put(keyEpoch, binary.BigEndian.AppendUint64(nil, 5))); err != nil {
			return err
		}
		for d, r := range recs {
			v, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if err := domains.Put([]byte(d), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPutRefusesRequestsOutOfOrder: requests that do not ascend strictly
// by seq are refused with ErrRequestOrder and change nothing.
func TestPutRefusesRequestsOutOfOrder(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "leases.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	first, err := st.Put(t.Context(), "d", lease.Record{Seq: 1, Requests: []lease.RequestRecord{{ID: "a", Seq: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, reqs := range [][]lease.RequestRecord{{{ID: "a", Seq: 1}, {ID: "b", Seq: 1}}, {{ID: "b", Seq: 5}, {ID: "a", Seq: 1}}} {
		bad := first
		bad.Seq, bad.Requests = 5, reqs
		if _, err := st.Put(t.Context(), "d", bad); !errors.Is(err, ErrRequestOrder) {
			t.Errorf("put %v: %v, want ErrRequestOrder", reqs, err)
		}
	}
	if got, err := st.Load(t.Context(), "d"); err != nil || !reflect.DeepEqual(got, first) {
		t.Errorf("after refused puts: %+v, %v; want %+v", got, err, first)
	}
}

// TestPutRefusesAnEmptyDomain: bbolt has no empty key, so a Put to ""
// gets ErrEmptyDomain before it reaches the writer, and the store goes on
// serving other domains.
func TestPutRefusesAnEmptyDomain(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "leases.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Put(t.Context(), "", lease.Record{Seq: 1}); !errors.Is(err, ErrEmptyDomain) {
		t.Fatalf("put to the empty domain: %v, want ErrEmptyDomain", err)
	}
	rec, err := st.Put(t.Context(), "d", lease.Record{Seq: 1, Requests: []lease.RequestRecord{{ID: "a", Seq: 1}}})
	if err != nil {
		t.Fatalf("put after the refused one: %v", err)
	}
	if got, err := st.Load(t.Context(), "d"); err != nil || !reflect.DeepEqual(got, rec) {
		t.Errorf("load d: %+v, %v; want %+v", got, err, rec)
	}
}

// TestLoadRefusesRequestsThatMissTheirSummary: a request key deleted or
// added behind the store's back makes Load (and Open's scan) report
// lease.ErrCorrupt instead of a record with requests the controller
// never kept.
func TestLoadRefusesRequestsThatMissTheirSummary(t *testing.T) {
	for name, tamper := range map[string]func(b *bolt.Bucket) error{
		"request deleted": func(b *bolt.Bucket) error { return b.Delete(requestKey(requestPrefix("d"), 1)) },
		"request added": func(b *bolt.Bucket) error {
			return b.Put(requestKey(requestPrefix("d"), 7), lease.RequestRecord{ID: "x", Seq: 7}.AppendJSON(nil))
		},
		"summary torn": func(b *bolt.Bucket) error { return b.Put(requestPrefix("d"), []byte{1}) },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "leases.db")
			st, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			rec := lease.Record{Seq: 2, Requests: []lease.RequestRecord{{ID: "a", Seq: 1}, {ID: "b", Seq: 2}}}
			if _, err := st.Put(t.Context(), "d", rec); err != nil {
				t.Fatal(err)
			}
			st = reopenAfter(t, st, path, func(tx *bolt.Tx) error { return tamper(tx.Bucket(bucketRequests)) })
			defer st.Close()
			if _, err := st.Load(t.Context(), "d"); !errors.Is(err, lease.ErrCorrupt) {
				t.Errorf("load: %v, want lease.ErrCorrupt", err)
			}
		})
	}
}
