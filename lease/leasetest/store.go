package leasetest

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/fencegate/fencegate/lease"
)

// Opener opens a store on one backing (a bbolt file, an etcd key prefix).
// Calling it again after the store was closed reopens the same backing.
type Opener func(t testing.TB) lease.Store

// RunStoreSuite runs the Store contract and the lease scenarios
// (in-process) against a store implementation. newBacking returns an
// Opener on a fresh, empty backing; it is called once per test.
func RunStoreSuite(t *testing.T, newBacking func(t testing.TB) Opener) {
	t.Run("contract", func(t *testing.T) { RunContract(t, newBacking) })
	t.Run("scenarios", func(t *testing.T) {
		Run(t, func(t *testing.T) Env {
			st := newBacking(t)(t)
			t.Cleanup(func() { mustClose(t, st) })
			clock := NewClock()
			c, keys := MustControllerOn(t, lease.Config{Clock: clock}, st)
			return Env{Client: Direct{C: c}, Clock: clock, Keys: keys}
		})
	})
}

// RunContract checks the lease.Store contract: epoch, compare-and-put on the
// record version, durability across a reopen.
func RunContract(t *testing.T, newBacking func(t testing.TB) Opener) {
	cases := []struct {
		name string
		run  func(t *testing.T, open Opener)
	}{
		{"new store", contractNew},
		{"put and load", contractPutLoad},
		{"stale version conflicts", contractConflict},
		{"racing puts: one wins", contractRace},
		{"domains are independent", contractDomains},
		{"reopen keeps epoch and records", contractReopen},
		{"scan lists every record", contractScan},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newBacking(t)) })
	}
}

var bg = context.Background()

// sampleRecord is a record with every field set, as Put is given it.
func sampleRecord(version, seq uint64) lease.Record {
	return lease.Record{Version: version, Seq: seq,
		Lease:    &lease.LeaseRecord{Token: "fg1.x.y", Epoch: 7, Seq: seq, Holder: "alice", RequestID: "r", TTLms: 1000},
		Requests: []lease.RequestRecord{{ID: "r", Holder: "alice", Seq: seq, AtMs: 123, TTLms: 1000}}}
}

// openClosed opens a store closed in t.Cleanup.
func openClosed(t *testing.T, open Opener) lease.Store {
	st := open(t)
	t.Cleanup(func() { mustClose(t, st) })
	return st
}

func mustClose(t testing.TB, st lease.Store) {
	if err := st.Close(); err != nil {
		t.Error(err)
	}
}

func mustPut(t testing.TB, st lease.Store, domain string, rec lease.Record) lease.Record {
	t.Helper()
	got, err := st.Put(bg, domain, rec)
	if err != nil {
		t.Fatalf("put %s at version %d: %v", domain, rec.Version, err)
	}
	if got.Version <= rec.Version {
		t.Fatalf("put %s: version %d after %d, want larger", domain, got.Version, rec.Version)
	}
	return got
}

func mustLoad(t testing.TB, st lease.Store, domain string) lease.Record {
	t.Helper()
	rec, err := st.Load(bg, domain)
	if err != nil {
		t.Fatalf("load %s: %v", domain, err)
	}
	return rec
}

func wantRecord(t testing.TB, got, want lease.Record) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("record %+v (lease %+v), want %+v (lease %+v)", got, got.Lease, want, want.Lease)
	}
}

func wantConflict(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("put: %v, want lease.ErrConflict", err)
	}
}

func contractNew(t *testing.T, open Opener) {
	st := openClosed(t, open)
	e1, err := st.Epoch(bg)
	if err != nil || e1 == 0 {
		t.Fatalf("epoch %d, %v; want > 0", e1, err)
	}
	if e2, _ := st.Epoch(bg); e2 != e1 {
		t.Fatalf("epoch changed from %d to %d", e1, e2)
	}
	wantRecord(t, mustLoad(t, st, "never"), lease.Record{})
}

func contractPutLoad(t *testing.T, open Opener) {
	st := openClosed(t, open)
	got := mustPut(t, st, "d", sampleRecord(0, 1))
	want := sampleRecord(got.Version, 1)
	wantRecord(t, got, want)
	wantRecord(t, mustLoad(t, st, "d"), want)
	next := want
	next.Lease, next.Seq = nil, 1
	got2 := mustPut(t, st, "d", next)
	next.Version = got2.Version
	wantRecord(t, mustLoad(t, st, "d"), next)
}

func contractConflict(t *testing.T, open Opener) {
	st := openClosed(t, open)
	first := mustPut(t, st, "d", sampleRecord(0, 1))
	_, err := st.Put(bg, "d", sampleRecord(0, 2))
	wantConflict(t, err)
	_, err = st.Put(bg, "d", sampleRecord(first.Version+1000, 3))
	wantConflict(t, err)
	_, err = st.Put(bg, "fresh", sampleRecord(5, 1))
	wantConflict(t, err)
	wantRecord(t, mustLoad(t, st, "d"), first)
	wantRecord(t, mustLoad(t, st, "fresh"), lease.Record{})
}

func contractRace(t *testing.T, open Opener) {
	st := openClosed(t, open)
	base := mustPut(t, st, "d", sampleRecord(0, 1))
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = st.Put(bg, "d", sampleRecord(base.Version, uint64(10+i)))
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("puts %d and %d both won from version %d", won, i, base.Version)
		case err == nil:
			won = i
		default:
			wantConflict(t, err)
		}
	}
	if won < 0 {
		t.Fatal("no put won")
	}
	if got := mustLoad(t, st, "d"); got.Seq != uint64(10+won) {
		t.Fatalf("stored seq %d, want the winner's %d", got.Seq, 10+won)
	}
}

func contractDomains(t *testing.T, open Opener) {
	st := openClosed(t, open)
	a := mustPut(t, st, "a", sampleRecord(0, 1))
	b := mustPut(t, st, "b", sampleRecord(0, 2))
	wantRecord(t, mustLoad(t, st, "a"), a)
	wantRecord(t, mustLoad(t, st, "b"), b)
}

func contractReopen(t *testing.T, open Opener) {
	st := open(t)
	epoch, _ := st.Epoch(bg)
	rec := mustPut(t, st, "d", sampleRecord(0, 1))
	mustClose(t, st)
	st = openClosed(t, open)
	if e, err := st.Epoch(bg); err != nil || e != epoch {
		t.Fatalf("epoch after reopen %d, %v; want %d", e, err, epoch)
	}
	wantRecord(t, mustLoad(t, st, "d"), rec)
	_, err := st.Put(bg, "d", sampleRecord(0, 2))
	wantConflict(t, err)
	mustPut(t, st, "d", sampleRecord(rec.Version, 2))
}

// contractScan checks lease.Scanner, for stores that implement it: every
// record written is listed once, as stored, and returning false stops.
func contractScan(t *testing.T, open Opener) {
	st := openClosed(t, open)
	sc, ok := st.(lease.Scanner)
	if !ok {
		t.Skip("the store is not a lease.Scanner")
	}
	want := map[string]lease.Record{"a": mustPut(t, st, "a", sampleRecord(0, 1)), "b": mustPut(t, st, "b", sampleRecord(0, 2))}
	got := map[string]lease.Record{}
	if err := sc.Scan(bg, func(d string, rec lease.Record) bool { got[d] = rec; return true }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("scan listed %+v, want %+v", got, want)
	}
	n := 0
	if err := sc.Scan(bg, func(string, lease.Record) bool { n++; return false }); err != nil || n != 1 {
		t.Fatalf("scan after fn returned false: %d calls, %v; want 1", n, err)
	}
}
