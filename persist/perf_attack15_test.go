package persist

import (
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/groupcommit"
)

// atk15Devices are valid device ids that are prefixes of each other or
// sort right next to each other ('-' 0x2D, '.' 0x2E, '0' 0x30 sit just
// above the NUL separator's neighbourhood in key order: "a" NUL … < "a-" …).
var atk15Devices = []string{"a", "a-", "a.", "a0", "aa", "A", "a-b", "a--", "b", "a.a", "a_", "aZ"}

// atk15CheckOrder checks every device's order index: contiguous first..last,
// ids all its own, exactly the wanted live ids in acceptance order, and
// lastOrder/lastStamp agreeing with the entries.
func atk15CheckOrder(t *testing.T, s *Store, live map[string][]string, lastN map[string]uint64) {
	t.Helper()
	err := s.w.View(func(tx *groupcommit.Tx) error {
		for _, d := range atk15Devices {
			j := journalFor(tx, d)
			last, first := j.orderBounds()
			var ids []string
			var stamps []time.Time
			if err := j.forEach(func(at time.Time, id string) error {
				ids, stamps = append(ids, id), append(stamps, at)
				return nil
			}); err != nil {
				return err
			}
			want := live[d]
			if fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Errorf("device %q order index holds %v, want %v", d, ids, want)
			}
			if len(want) > 0 {
				if last-first+1 != uint64(len(want)) || last != lastN[d] {
					t.Errorf("device %q bounds first %d last %d for %d live (want last %d)", d, first, last, len(want), lastN[d])
				}
				if lo := j.lastOrder(); lo != last {
					t.Errorf("device %q lastOrder %d, bounds last %d", d, lo, last)
				}
				if ls := j.lastStamp(); !ls.Equal(stamps[len(stamps)-1]) {
					t.Errorf("device %q lastStamp %v, newest entry %v", d, ls, stamps[len(stamps)-1])
				}
			} else if last != 0 || first != 0 || j.lastOrder() != 0 {
				t.Errorf("device %q has no entries but bounds %d..%d", d, first, last)
			}
			for _, id := range want {
				r, ok, err := j.get(id)
				if err != nil || !ok {
					t.Errorf("device %q: live %s not in journal (%v)", d, id, err)
				}
				_ = r
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Devices whose ids are prefixes of each other, or sort between a device's
// prefix and its end key, interleave commands with pruning on: each
// device's order numbers must stay its own, contiguous and growing; pruning
// must remove exactly each device's oldest records; a retry of every
// retained command is a Duplicate (never re-accepted: I4), across a reopen.
func TestAttack15PrefixDevicesOrderAndPruning(t *testing.T) {
	const keep = 4
	path := filepath.Join(t.TempDir(), "fence.db")
	s := mustOpenPath(t, path, Options{MaxRecords: keep})
	sg := testSigner(t)
	rng := rand.New(rand.NewSource(15))
	live := map[string][]string{}
	lastN := map[string]uint64{}
	cmds := map[string]Command{}
	n := 0
	seq := uint64(1)
	for round := 0; round < 120; round++ {
		d := atk15Devices[rng.Intn(len(atk15Devices))]
		n++
		id := fmt.Sprintf("%s#%d", d, n)
		if rng.Intn(3) == 0 {
			seq++
		}
		cmd := Command{Device: d, ID: id, Token: mustToken(t, sg, "plant", 1, seq, "h"), Op: "set", Args: []byte(fmt.Sprintf(`{"v":%d}`, n))}
		dec := mustAccept(t, s, cmd)
		if dec.Outcome != Accepted {
			t.Fatalf("%s: %v", id, dec.Outcome)
		}
		lastN[d]++
		if o := atk15Order(t, s, d, id); o != lastN[d] {
			t.Fatalf("%s got order %d, want %d (another device's order entry picked?)", id, dec.Record.order, lastN[d])
		}
		if err := s.Complete(ctxT(t), d, id, []byte(`{"ok":true}`)); err != nil {
			t.Fatal(err)
		}
		cmds[id] = cmd
		live[d] = append(live[d], id)
		if err := s.Prune(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if len(live[d]) > keep {
			live[d] = live[d][len(live[d])-keep:]
		}
		atk15CheckOrder(t, s, live, lastN)
		if t.Failed() {
			t.FailNow()
		}
	}
	check := func(s *Store) {
		for d, ids := range live {
			for _, id := range ids {
				if dec := mustAccept(t, s, cmds[id]); dec.Outcome != Duplicate || dec.Record.State != StateDone {
					t.Fatalf("retry of retained %s: %v (%s), want Duplicate/done", id, dec.Outcome, dec.Record.State)
				}
			}
			recs, err := s.Journal(d)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(ids) {
				t.Fatalf("device %q journal has %d records, want %d", d, len(recs), len(ids))
			}
			for i, r := range recs {
				if r.ID != ids[i] {
					t.Fatalf("device %q journal[%d] = %s, want %s", d, i, r.ID, ids[i])
				}
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpenPath(t, path, Options{MaxRecords: keep})
	check(s)
	atk15CheckOrder(t, s, live, lastN)
	// New commands after the reopen continue each device's numbering.
	for _, d := range atk15Devices {
		n++
		id := fmt.Sprintf("%s#%d", d, n)
		dec := mustAccept(t, s, Command{Device: d, ID: id, Token: mustToken(t, sg, "plant", 1, seq, "h"), Op: "set"})
		lastN[d]++
		if o := atk15Order(t, s, d, id); dec.Outcome != Accepted || o != lastN[d] {
			t.Fatalf("%s after reopen: %v order %d, want Accepted order %d", id, dec.Outcome, o, lastN[d])
		}
	}
}

// A device whose journal was pruned empty (all its records too old) while a
// neighbour device (prefix / next in key order) keeps entries must restart
// from its own numbering without taking the neighbour's last number, and
// pruning it again must not delete the neighbour's records.
func TestAttack15EmptyDeviceBetweenNeighbours(t *testing.T) {
	var up atomic.Int64
	s := mustOpen(t, Options{MaxRecords: 100, MaxAge: time.Minute, Uptime: func() time.Duration { return time.Duration(up.Load()) }})
	sg := testSigner(t)
	tok := mustToken(t, sg, "plant", 1, 1, "h")
	acc := func(d, id string) Decision {
		dec := mustAccept(t, s, Command{Device: d, ID: id, Token: tok, Op: "set"})
		if dec.Outcome != Accepted {
			t.Fatalf("%s/%s: %v", d, id, dec.Outcome)
		}
		if err := s.Complete(ctxT(t), d, id, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		return dec
	}
	for i := range 3 {
		acc("a", fmt.Sprint("old", i))
	}
	up.Store(int64(2 * time.Minute))
	for i := range 5 {
		acc("a-", fmt.Sprint("n", i))
		acc("A", fmt.Sprint("n", i))
	}
	if err := s.Prune(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if recs, _ := s.Journal("a"); len(recs) != 0 {
		t.Fatalf("a keeps %d old records", len(recs))
	}
	acc("a", "new")
	if o := atk15Order(t, s, "a", "new"); o != 1 {
		t.Fatalf("a's first order after an empty journal = %d, want 1 (a neighbour's number?)", o)
	}
	for _, d := range []string{"a-", "A"} {
		recs, err := s.Journal(d)
		if err != nil || len(recs) != 5 {
			t.Fatalf("%s: %d records (%v), want 5", d, len(recs), err)
		}
		for i := range 5 {
			if dec := mustAccept(t, s, Command{Device: d, ID: fmt.Sprint("n", i), Token: tok, Op: "set"}); dec.Outcome != Duplicate {
				t.Fatalf("%s/n%d retry: %v, want Duplicate", d, i, dec.Outcome)
			}
		}
	}
	if dec := mustAccept(t, s, Command{Device: "a", ID: "new", Token: tok, Op: "set"}); dec.Outcome != Duplicate {
		t.Fatalf("a/new retry: %v", dec.Outcome)
	}
}

// atk15Order reads the journaled order number of device's id from the file.
func atk15Order(t *testing.T, s *Store, device, id string) uint64 {
	t.Helper()
	var o uint64
	if err := s.w.View(func(tx *groupcommit.Tx) error {
		r, ok, err := journalFor(tx, device).get(id)
		if !ok || err != nil {
			return fmt.Errorf("%s/%s not journaled: %v", device, id, err)
		}
		o = r.order
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return o
}

// A stored fence corrupted after its good bytes were memoized must still
// surface ErrCorrupt (the memo is keyed by bytes), from every reader; and
// restoring the good bytes reads the good fence again.
func TestAttack15MemoCorruptAfterWarm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.db")
	s := mustOpenPath(t, path, Options{})
	sg := testSigner(t)
	tok := mustToken(t, sg, "plant", 1, 5, "h")
	mustAccept(t, s, Command{Device: "d1", ID: "c1", Token: tok, Op: "set"})
	for range 3 {
		if got, err := s.DomainFence("plant"); err != nil || got.Seq != 5 {
			t.Fatalf("warm: %v %v", got, err)
		}
	}
	var good []byte
	bad := [][]byte{
		[]byte(`{"token":"fg1.garbage","raised_at":1}`),
		[]byte(`{"token":`),
		nil, // replaced below by good bytes with one flipped signature-irrelevant byte in the body
	}
	if err := s.w.View(func(tx *groupcommit.Tx) error {
		good = append([]byte(nil), tx.Bucket(bucketDomains).Get([]byte("plant"))...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	trunc := append([]byte(nil), good...)
	trunc = append(trunc[:len(trunc)-1-len(`","raised_at":`)-14], []byte(`","raised_at":1}`)...) // shortened token
	bad[2] = trunc
	for i, b := range bad {
		putBothFences(t, s, b)
		if _, perr := parseFence("x", b); perr == nil {
			t.Fatalf("bad[%d] parses: the test's corruption is not one", i)
		}
		if _, err := s.DomainFence("plant"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bad[%d]: DomainFence err %v, want ErrCorrupt", i, err)
		}
		if _, err := s.Fences(); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bad[%d]: Fences err %v, want ErrCorrupt", i, err)
		}
		if d, err := s.Accept(ctxT(t), Command{Device: "d1", ID: fmt.Sprint("x", i), Token: mustToken(t, sg, "plant", 1, 4, "h"), Op: "set"}); err == nil {
			t.Fatalf("bad[%d]: Accept over a corrupt fence decided %v, want an error", i, d.Outcome)
		}
		_ = s.Close() // a store that met a corrupt fence in a write has failed: reopen it (the log replays the corruption)
		s = mustOpenPath(t, path, Options{})
	}
	putBothFences(t, s, good) // repair
	if got, err := s.DomainFence("plant"); err != nil || got.Seq != 5 {
		t.Fatalf("after repair: %v %v", got, err)
	}
	if d := mustAccept(t, s, Command{Device: "d1", ID: "c4", Token: mustToken(t, sg, "plant", 1, 4, "h"), Op: "set"}); d.Outcome != Stale {
		t.Fatalf("stale after repair: %v", d.Outcome)
	}
}

// The memo across stores and names: the same bytes under two devices and
// in two store files decode to the same fence; a fence raised over a
// memoized one is what every reader sees, and a token below it is Stale
// (I2) in the live store and after a reopen, while other goroutines churn
// the memo past its bound (clearing it over and over) and read concurrently.
func TestAttack15MemoChurnDuringFenceRaises(t *testing.T) {
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	s := mustOpenPath(t, path, Options{})
	s2 := mustOpen(t, Options{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var churnErr atomic.Value
	churnTok := mustToken(t, sg, "plant", 1, 1, "z")
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				b := []byte(fmt.Sprintf(`{"token":%q,"raised_at":%d}`, churnTok.Raw, g*1_000_000+i))
				// the slot the stores read, or a new one each time (clears)
				slot := domainSlot("plant")
				if i%2 == 1 {
					slot = deviceSlot(fmt.Sprint("churn", g, "-", i))
				}
				f, err := decodeFence(slot, b)
				if err != nil || f.RaisedAt.UnixMilli() != int64(g*1_000_000+i) || f.Token != churnTok {
					churnErr.Store(fmt.Sprintf("churn decode %d/%d: %+v %v", g, i, f, err))
					return
				}
			}
		}()
	}
	var readErr atomic.Value
	var floor atomic.Uint64 // highest seq whose Accept has returned
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				lo := floor.Load()
				got, err := s.DomainFence("plant")
				if err != nil || got.Seq < lo {
					readErr.Store(fmt.Sprintf("DomainFence %d (err %v) below committed %d", got.Seq, err, lo))
					return
				}
			}
		}()
	}
	for seq := uint64(1); seq <= 300; seq++ {
		tok := mustToken(t, sg, "plant", 1, seq, "h")
		for _, st := range []*Store{s, s2} {
			for _, d := range []string{"p1", "p2"} {
				dec := mustAccept(t, st, Command{Device: d, ID: fmt.Sprint("c", seq), Token: tok, Op: "set"})
				if dec.Outcome != Accepted || dec.Fence.Seq != seq {
					t.Fatalf("seq %d %s: %v fence %d", seq, d, dec.Outcome, dec.Fence.Seq)
				}
			}
		}
		floor.Store(seq)
		if seq > 1 {
			stale := mustToken(t, sg, "plant", 1, seq-1, "h")
			if dec := mustAccept(t, s, Command{Device: "p1", ID: fmt.Sprint("stale", seq), Token: stale, Op: "set"}); dec.Outcome != Stale {
				t.Fatalf("stale seq %d under fence %d: %v (I2)", seq-1, seq, dec.Outcome)
			}
		}
	}
	close(stop)
	wg.Wait()
	if v := churnErr.Load(); v != nil {
		t.Fatal(v)
	}
	if v := readErr.Load(); v != nil {
		t.Fatal(v)
	}
	fs, err := s.Fences()
	if err != nil || fs["p1"].Token.Seq != 300 || fs["p2"].Token.Seq != 300 {
		t.Fatalf("fences %+v %v", fs, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpenPath(t, path, Options{})
	if dec := mustAccept(t, s, Command{Device: "p2", ID: "late", Token: mustToken(t, sg, "plant", 1, 299, "h"), Op: "set"}); dec.Outcome != Stale {
		t.Fatalf("after reopen: seq 299 under 300: %v (I2)", dec.Outcome)
	}
	// Same position, another lease (holder): Conflict, even though a
	// memoized fence of the same (epoch, seq) exists.
	if dec := mustAccept(t, s, Command{Device: "p2", ID: "conf", Token: mustToken(t, sg, "plant", 1, 300, "other"), Op: "set"}); dec.Outcome != Conflict {
		t.Fatalf("same position other holder: %v, want Conflict", dec.Outcome)
	}
}

// Concurrent commands to prefix-neighbour devices share group commits, so
// puts and the writer's pruning of several devices interleave in one
// transaction: afterwards every device's order index and journal must
// agree one to one (same ids, each record's order number pointing at its
// own entry, numbers contiguous and strictly growing with acceptance), and
// the newest MaxRecords commands of each device must answer Duplicate.
func TestAttack15ConcurrentNeighboursOrderIndexConsistent(t *testing.T) {
	const keep, per = 3, 60
	s := mustOpen(t, Options{MaxRecords: keep})
	sg := testSigner(t)
	tok := mustToken(t, sg, "plant", 1, 1, "h")
	var wg sync.WaitGroup
	errc := make(chan error, len(atk15Devices))
	for _, d := range atk15Devices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				id := fmt.Sprintf("%s#%03d", d, i)
				dec, err := s.Accept(ctxT(t), Command{Device: d, ID: id, Token: tok, Op: "set"})
				if err != nil || dec.Outcome != Accepted {
					errc <- fmt.Errorf("%s: %v %v", id, dec.Outcome, err)
					return
				}
				if i%2 == 0 { // half completed at once, half left pending a while
					if err := s.Complete(ctxT(t), d, id, []byte(`{}`)); err != nil {
						errc <- err
						return
					}
				} else {
					go func() { _ = s.Complete(ctxT(t), d, id, []byte(`{}`)) }()
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	// let the stray completes finish, then prune to the bound
	deadline := time.Now().Add(5 * time.Second)
	for {
		pending := 0
		_ = s.w.View(func(tx *groupcommit.Tx) error { pending = tx.Bucket(bucketPending).Stats().KeyN; return nil })
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.Prune(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := s.w.View(func(tx *groupcommit.Tx) error {
		for _, d := range atk15Devices {
			j := journalFor(tx, d)
			last, first := j.orderBounds()
			var ids []string
			_ = j.forEach(func(_ time.Time, id string) error { ids = append(ids, id); return nil })
			if uint64(len(ids)) != last-first+1 || len(ids) != keep {
				t.Errorf("%q: %d order entries, bounds %d..%d, want %d", d, len(ids), first, last, keep)
			}
			for k, id := range ids {
				r, ok, err := j.get(id)
				if !ok || err != nil || r.order != first+uint64(k) {
					t.Errorf("%q: entry %d (%s) → record %v order %d (%v), want order %d", d, k, id, ok, r.order, err, first+uint64(k))
				}
				if want := fmt.Sprintf("%s#%03d", d, per-keep+k); id != want {
					t.Errorf("%q: entry %d is %s, want %s (pruned the wrong records?)", d, k, id, want)
				}
			}
			if last != per {
				t.Errorf("%q: last order %d, want %d", d, last, per)
			}
		}
		// every journal key belongs to a device whose order index names it
		return tx.Bucket(bucketJournal).ForEach(func(k, _ []byte) error {
			dev, id, _ := splitDeviceKey(k)
			var found bool
			_ = journalFor(tx, dev).forEach(func(_ time.Time, oid string) error {
				if oid == id {
					found = true
				}
				return nil
			})
			if !found {
				t.Errorf("journal record %q/%q has no order entry", dev, id)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	for _, d := range atk15Devices {
		for i := per - keep; i < per; i++ {
			if dec := mustAccept(t, s, Command{Device: d, ID: fmt.Sprintf("%s#%03d", d, i), Token: tok, Op: "set"}); dec.Outcome != Duplicate {
				t.Fatalf("%s#%03d retry: %v, want Duplicate (I4)", d, i, dec.Outcome)
			}
		}
	}
}

// putBothFences writes v, as is, as the stored fence of domain "plant" and
// of device "d1", behind the store's checks (a write of its own).
func putBothFences(t *testing.T, s *Store, v []byte) {
	t.Helper()
	if err := s.w.Submit(ctxT(t), "", func(tx *groupcommit.Tx) (bool, error) {
		if err := tx.Bucket(bucketDomains).Put([]byte("plant"), v); err != nil {
			return false, err
		}
		return true, tx.Bucket(bucketFences).Put([]byte("d1"), v)
	}); err != nil {
		t.Fatal(err)
	}
}
