package boltstore

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/fencegate/fencegate/lease"
)

// a21MixSeq is the first summary's mix, SplitMix64's finalizer: the
// store summed it over a run's seqs.
func a21MixSeq(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// a21Inverse returns the inverse of odd a modulo 2^64 (Newton's iteration).
func a21Inverse(a uint64) uint64 {
	x := a
	for range 6 {
		x *= 2 - a*x
	}
	return x
}

// a21UnxorShift inverts x ^= x >> s.
func a21UnxorShift(x uint64, s uint) uint64 {
	y := x
	for range 64 / s {
		y = x ^ y>>s
	}
	return y
}

// a21Unmix inverts a21MixSeq: SplitMix64's finalizer is a bijection, and
// each of its steps is undone in closed form.
func a21Unmix(y uint64) uint64 {
	y = a21UnxorShift(y, 31)
	y *= a21Inverse(0x94d049bb133111eb)
	y = a21UnxorShift(y, 27)
	y *= a21Inverse(0xbf58476d1ce4e5b9)
	return a21UnxorShift(y, 30)
}

// TestAttack21SummaryCollisionKeepsDroppedRequests: the fast path of
// syncRequests proves "the rest of want is what is stored" by the run's
// summary. The first summary was the count and a plain sum of
// a21MixSeq over the seqs (it failed this test). a21MixSeq is invertible, so two
// different seq sets with the same count and sum take one line to build:
// {c, d} with a21MixSeq(c)+mixSeq(d) == mixSeq(1)+mixSeq(2), here c =
// 32961091 and d = a21Unmix(target-a21MixSeq(c)) = 837771122101 (found by
// walking c up from 3 until d fell below the top, 2^40).
//
// Stored: requests {1, 2, 2^40}. Put: requests {c, d, 2^40} — two
// requests inserted below the top and two dropped, a "lawless" history
// that the fast path hands to syncAll whenever anything does not add up
// (requests_test.go wants it stored exactly). Every seq of want is at or
// below the top, so kept = 3, ndrops = 0, the summary matches, and the
// Put writes no request key: Load returns {1, 2, 2^40} — requests the
// Put dropped, and not the two it added — with no ErrCorrupt, now and
// after a reopen.
func TestAttack21SummaryCollisionKeepsDroppedRequests(t *testing.T) {
	const c, top = 32961091, 1 << 40
	target := a21MixSeq(1) + a21MixSeq(2)
	d := a21Unmix(target - a21MixSeq(c))
	if a21MixSeq(c)+a21MixSeq(d) != target || d != 837771122101 || !(c < d && d < top) {
		t.Fatalf("collision not as computed: c %d d %d", c, d)
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "leases.db")
	st := a21Open(t, path)
	defer func() { st.Close() }()
	req := func(id string, seq uint64) lease.RequestRecord {
		return lease.RequestRecord{ID: id, Holder: "h", Seq: seq, AtMs: 1_800_000_000_000, TTLms: 1000}
	}
	first, err := st.Put(ctx, "pump", lease.Record{Seq: top,
		Requests: []lease.RequestRecord{req("r1", 1), req("r2", 2), req("rtop", top)}})
	if err != nil {
		t.Fatal(err)
	}
	second := first
	second.Requests = []lease.RequestRecord{req("rc", c), req("rd", d), req("rtop", top)}
	want, err := st.Put(ctx, "pump", second)
	if err != nil {
		t.Fatal(err)
	}
	for _, when := range []string{"after the Put", "after a reopen"} {
		got, err := st.Load(ctx, "pump")
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Load returned requests %v, the Put stored %v: the summary's sum matched a different seq set, so the fast path wrote nothing",
				when, a21Show(got), a21Show(want))
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		st = a21Open(t, path)
	}
}
