package boltstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/lease"
)

// a21Domain is one domain of the attack-21 model: version v (1, 2, …) of
// its record is a grant of seq base+(v-1)*step, and remembers the request
// of every earlier grant i for life(i) versions — so requests drop out
// from the bottom, from the middle and (life 1) right after their grant,
// and are never changed while they stay (lease.Record's rule). Every
// history the model writes is one the controller could write.
type a21Domain struct {
	name       string
	base, step uint64
	maxV       int   // the last version whose seq fits in 64 bits
	lives      []int // life(i) at lives[i]
}

// a21Domains are names that sit next to each other in the requests
// bucket: prefixes of each other, a NUL after a name, the uvarint length
// crossing one byte (127/128) and a byte's range (255/256/257: "a" and
// "a"*257 share a length byte mod 256), names that start with a byte a
// uvarint uses, a name that is another domain's prefix plus a request
// seq of it, and seqs starting at 0 and ending at MaxUint64.
func a21Domains() []a21Domain {
	return []a21Domain{
		a21NewDomain("d", 0, 1),
		a21NewDomain("d\x00", 1, 1),
		a21NewDomain("dd", 5, 3),
		a21NewDomain("d\x00\x00", 0, 1<<40),
		a21NewDomain("a", 1, 1),
		a21NewDomain(strings.Repeat("a", 127), 1, 1),
		a21NewDomain(strings.Repeat("a", 128), 1, 1),
		a21NewDomain(strings.Repeat("a", 129), 1, 1),
		a21NewDomain(strings.Repeat("a", 128)+"\x00", 1, 1),
		a21NewDomain(strings.Repeat("a", 256), 1, 1),
		a21NewDomain(strings.Repeat("a", 257), 1, 1),
		a21NewDomain("\x80", 1, 1),
		a21NewDomain("\x01", 1, 1),
		a21NewDomain("\x01a", 1, 1),
		// "d" + the key suffix of "d"'s request seq 1: its record key in
		// the domains bucket and its run prefix must not meet "d"'s keys.
		a21NewDomain("d"+string(binary.BigEndian.AppendUint64(nil, 1)), 1, 1),
		a21NewDomain("max", math.MaxUint64-349, 1),
	}
}

// a21NewDomain is a model domain of up to 350 versions, fewer if its
// seqs would pass MaxUint64 first.
func a21NewDomain(name string, base, step uint64) a21Domain {
	d := a21Domain{name: name, base: base, step: step, maxV: int(min(349, (math.MaxUint64-base)/step)) + 1}
	d.lives = make([]int, d.maxV+1)
	for j := 1; j <= d.maxV; j++ {
		d.lives[j] = d.lifeOf(j)
	}
	return d
}

func (d a21Domain) seq(i int) uint64 { return d.base + uint64(i-1)*d.step }

// life is how many versions grant i's request stays: 1..300 (more than
// lease.MaxRequests would keep, which the store does not bound).
func (d a21Domain) life(i int) int { return d.lives[i] }

func (d a21Domain) lifeOf(i int) int {
	h := fnv.New64a()
	fmt.Fprintf(h, "%q/%d", d.name, i)
	x := h.Sum64()
	switch x % 4 {
	case 0:
		return 1 + int(x>>8%4) // short: a drop right above the bottom
	default:
		return 1 + int(x>>8%300)
	}
}

func (d a21Domain) request(i int) lease.RequestRecord {
	return lease.RequestRecord{ID: fmt.Sprintf("req-%d-%x", i, d.seq(i)), Holder: fmt.Sprintf("holder%d", i%3),
		Seq: d.seq(i), AtMs: int64(1_800_000_000_000 + i), TTLms: uint64(d.life(i))}
}

// record is version v of d's record, as Load must return it (v 0: none).
func (d a21Domain) record(v int) lease.Record {
	if v == 0 {
		return lease.Record{}
	}
	seq := d.seq(v)
	r := lease.Record{Version: uint64(v), Seq: seq, Lease: &lease.LeaseRecord{Token: fmt.Sprintf("fg1.tok%d", seq),
		Epoch: 7, Seq: seq, Holder: fmt.Sprintf("holder%d", v%3), RequestID: d.request(v).ID, TTLms: 1000}}
	for i := max(1, v-300); i <= v; i++ {
		if v < i+d.life(i) {
			r.Requests = append(r.Requests, d.request(i))
		}
	}
	return r
}

// put writes version v of d's record over version v-1.
func (d a21Domain) put(ctx context.Context, st *Store, v int) error {
	rec := d.record(v)
	rec.Version--
	got, err := st.Put(ctx, d.name, rec)
	if err != nil {
		return fmt.Errorf("domain %q: put version %d: %w", d.name, v, err)
	}
	if got.Version != uint64(v) {
		return fmt.Errorf("domain %q: put version %d returned version %d", d.name, v, got.Version)
	}
	return nil
}

// check returns an error unless rec is exactly version rec.Version of
// d's record.
func (d a21Domain) check(rec lease.Record) error {
	if rec.Version > uint64(d.maxV) {
		return fmt.Errorf("domain %q: version %d, the model ends at %d", d.name, rec.Version, d.maxV)
	}
	want := d.record(int(rec.Version))
	if len(want.Requests) == 0 && len(rec.Requests) == 0 {
		want.Requests, rec.Requests = nil, nil
	}
	if !reflect.DeepEqual(rec, want) {
		return fmt.Errorf("domain %q version %d: got %s, want %s", d.name, rec.Version, a21Show(rec), a21Show(want))
	}
	return nil
}

// a21Show prints a record's seq and its requests' seqs.
func a21Show(r lease.Record) string {
	seqs := make([]uint64, len(r.Requests))
	for i, q := range r.Requests {
		seqs[i] = q.Seq
	}
	return fmt.Sprintf("{version %d seq %d lease %v requests %v}", r.Version, r.Seq, r.Lease != nil, seqs)
}

// a21CheckAll loads every domain (and scans the store) and wants each
// record exactly its model version, at least floor[i] and at most
// ceil[i] (nil: no bound); it returns the versions found.
func a21CheckAll(ctx context.Context, st *Store, ds []a21Domain, floor, ceil []int) ([]int, error) {
	got := make([]int, len(ds))
	byName := map[string]int{}
	for i, d := range ds {
		byName[d.name] = i
		rec, err := st.Load(ctx, d.name)
		if err != nil {
			return nil, err
		}
		if err := d.check(rec); err != nil {
			return nil, err
		}
		got[i] = int(rec.Version)
		if floor != nil && got[i] < floor[i] {
			return nil, fmt.Errorf("domain %q: version %d, below the acknowledged %d (an acknowledged Put lost)", d.name, got[i], floor[i])
		}
		if ceil != nil && got[i] > ceil[i] {
			return nil, fmt.Errorf("domain %q: version %d, above the %d ever submitted", d.name, got[i], ceil[i])
		}
	}
	scanned := 0
	var scanErr error
	err := st.Scan(ctx, func(domain string, rec lease.Record) bool {
		i, ok := byName[domain]
		switch {
		case !ok:
			scanErr = fmt.Errorf("scan: unknown domain %q", domain)
		case int(rec.Version) != got[i]:
			scanErr = fmt.Errorf("scan: domain %q at version %d, Load said %d", domain, rec.Version, got[i])
		default:
			scanErr = ds[i].check(rec)
		}
		scanned++
		return scanErr == nil
	})
	if err == nil {
		err = scanErr
	}
	if err != nil {
		return nil, err
	}
	stored := 0
	for _, v := range got {
		if v > 0 {
			stored++
		}
	}
	if scanned != stored {
		return nil, fmt.Errorf("scan saw %d domains, %d are stored", scanned, stored)
	}
	return got, nil
}

// TestAttack21ModelIsLegal: the model's histories are what lease.Record
// allows (requests ascend strictly, an entry never changes while it
// stays), they drop from the middle, and the domain "max" reaches seq
// MaxUint64 — or the other tests prove less than they claim.
func TestAttack21ModelIsLegal(t *testing.T) {
	middle := 0
	for _, d := range a21Domains() {
		prev := d.record(0)
		for v := 1; v <= d.maxV; v++ {
			r := d.record(v)
			if err := checkRequestOrder(r.Requests); err != nil {
				t.Fatalf("%q v%d: %v", d.name, v, err)
			}
			if len(r.Requests) == 0 || r.Requests[len(r.Requests)-1].Seq != r.Seq {
				t.Fatalf("%q v%d: the grant's own request is not the top", d.name, v)
			}
			kept := map[uint64]lease.RequestRecord{}
			for _, q := range r.Requests {
				kept[q.Seq] = q
			}
			for j, q := range prev.Requests {
				k, ok := kept[q.Seq]
				if ok && k != q {
					t.Fatalf("%q v%d: request seq %d changed", d.name, v, q.Seq)
				}
				if !ok && j > 0 && j < len(prev.Requests)-1 {
					if _, below := kept[prev.Requests[j-1].Seq]; below {
						middle++
					}
				}
			}
			prev = r
		}
		if d.name == "max" && prev.Seq != math.MaxUint64 {
			t.Fatalf("max ends at seq %d", prev.Seq)
		}
	}
	if middle < 100 {
		t.Fatalf("only %d drops from the middle", middle)
	}
}
