package persist

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// a19Memo returns the memo's entry for slot (and whether there is one).
func a19Memo(slot fenceSlot) (memoFence, bool) {
	fenceMemo.Lock()
	defer fenceMemo.Unlock()
	e, ok := fenceMemo.m[slot]
	return e, ok
}

// a19Exact fails unless tok is exactly what its wire form decodes to and
// that wire form is want's.
func a19Exact(t *testing.T, what string, tok, want fence.Token) {
	t.Helper()
	if tok.Raw != want.Raw {
		t.Fatalf("%s: Raw %q, want the wire token %q", what, tok.Raw, want.Raw)
	}
	wire, err := fence.ParseUnverified(tok.Raw)
	if err != nil || wire != tok {
		t.Fatalf("%s: token %+v is not its wire form %+v (%v)", what, tok, wire, err)
	}
}

// a19Seqs reads every view of store s: the durable domain fence, the
// domains bucket, the device records and a backup's summary.
func a19Seqs(t *testing.T, s *Store, domain string) (durable uint64, domains map[string]Fence, devices map[string]Fence) {
	t.Helper()
	tok, err := s.DomainFence(domain)
	if err != nil {
		t.Fatalf("DomainFence(%s): %v", domain, err)
	}
	if domains, err = s.DomainFences(); err != nil {
		t.Fatalf("DomainFences: %v", err)
	}
	if devices, err = s.Fences(); err != nil {
		t.Fatalf("Fences: %v", err)
	}
	return tok.Seq, domains, devices
}

// A batch fails after encodeFence remembered its raise (domain "dom" and
// a device also named "dom" at seq 20): the memo then disagrees with the
// file (seq 10). The reopen in the same process — memo still holding
// seq 20 — must read the file: every view says 10, a Backup/Inspect says
// 10, seq 15 is accepted (not stale against the phantom 20) and seq 12
// after it is stale. Then a real raise to the very token of the failed
// batch at the same time writes the very bytes the memo remembered, which
// decode to the same fence. I2, I3.
func TestAttack19FailedBatchMemoNotServedAfterReopen(t *testing.T) {
	sg := testSigner(t)
	at := time.UnixMilli(1_700_000_000_000)
	path := filepath.Join(t.TempDir(), "fence.db")
	var fail atomic.Bool
	s := mustOpenPath(t, path, Options{Now: func() time.Time { return at }, beforeCommit: func() error {
		if fail.Load() {
			return errors.New("injected disk failure")
		}
		return nil
	}})
	t10 := mustToken(t, sg, "dom", 1, 10, "h")
	t20 := mustToken(t, sg, "dom", 1, 20, "h")
	if _, err := s.Raise(ctxT(t), t10); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if _, err := s.Accept(ctxT(t), Command{Device: "dom", ID: "c20", Token: t20, Op: "set"}); err == nil {
		t.Fatal("accept through a failing disk succeeded")
	}
	// The scene: the memo remembers the failed batch's fence.
	for _, slot := range []fenceSlot{domainSlot("dom"), deviceSlot("dom")} {
		if e, ok := a19Memo(slot); !ok || e.f.Token.Seq != 20 {
			t.Fatalf("memo %+v after the failed batch: %v %+v (the scene needs the remembered seq 20)", slot, ok, e.f.Token)
		}
	}
	_ = s.Close()

	opts := Options{Now: func() time.Time { return at }}
	r, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	durable, domains, devices := a19Seqs(t, r, "dom")
	if durable != 10 || domains["dom"].Token.Seq != 10 {
		t.Fatalf("after reopen: DomainFence seq %d, DomainFences seq %d; want 10 (20 was never durable)", durable, domains["dom"].Token.Seq)
	}
	if f, ok := devices["dom"]; ok {
		t.Fatalf("device record of a failed accept after reopen: %+v", f.Token)
	}
	a19Exact(t, "domain fence after reopen", domains["dom"].Token, t10)
	var buf bytes.Buffer
	if _, err := r.Backup(&buf, nil); err != nil {
		t.Fatal(err)
	}
	bp := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(bp, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if sum, err := Inspect(bp); err != nil || sum.Domains["dom"].Token.Seq != 10 {
		t.Fatalf("Inspect of a backup after reopen: %+v %v, want seq 10", sum.Domains["dom"].Token, err)
	}
	if d := mustAccept(t, r, Command{Device: "dom", ID: "c15", Token: mustToken(t, sg, "dom", 1, 15, "h"), Op: "set"}); d.Outcome != Accepted {
		t.Fatalf("seq 15 over the durable fence 10: %v (fence %d)", d.Outcome, d.Fence.Seq)
	}
	if d := mustAccept(t, r, Command{Device: "dom2", ID: "c12", Token: mustToken(t, sg, "dom", 1, 12, "h"), Op: "set"}); d.Outcome != Stale {
		t.Fatalf("seq 12 under the fence 15: %v", d.Outcome)
	}
	if d, err := r.Raise(ctxT(t), t20); err != nil || d.Outcome != Accepted || !d.Raised {
		t.Fatalf("raise to 20 for real: %+v %v", d, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = mustOpenPath(t, path, opts)
	durable, domains, devices = a19Seqs(t, r, "dom")
	if durable != 20 || domains["dom"].Token.Seq != 20 || devices["dom"].Token.Seq != 15 {
		t.Fatalf("after the real raise: durable %d, domain %d, device %d; want 20, 20, 15", durable, domains["dom"].Token.Seq, devices["dom"].Token.Seq)
	}
	a19Exact(t, "domain fence after the real raise", domains["dom"].Token, t20)
}

// Two stores in one process with the same device and domain names ("x",
// device "x" in domain "x") and the same raise times: A is at seq 9, B at
// seq 3, so their slots' bytes differ by the token only. Interleaved and
// concurrent reads (-race) each see their own store, and B accepts seq 5
// (above its 3) while A calls it stale (under its 9). I2.
func TestAttack19TwoStoresSameNames(t *testing.T) {
	sg := testSigner(t)
	at := time.UnixMilli(1_700_000_000_555)
	opts := Options{Now: func() time.Time { return at }}
	a, b := mustOpen(t, opts), mustOpen(t, opts)
	t9, t3 := mustToken(t, sg, "x", 1, 9, "h"), mustToken(t, sg, "x", 1, 3, "h")
	mustAccept(t, a, Command{Device: "x", ID: "a9", Token: t9, Op: "set"})
	mustAccept(t, b, Command{Device: "x", ID: "b3", Token: t3, Op: "set"})
	check := func(s *Store, want fence.Token) error {
		tok, err := s.DomainFence("x")
		if err != nil {
			return err
		}
		doms, err := s.DomainFences()
		if err != nil {
			return err
		}
		devs, err := s.Fences()
		if err != nil {
			return err
		}
		for what, got := range map[string]fence.Token{"DomainFence": tok, "DomainFences": doms["x"].Token, "Fences": devs["x"].Token} {
			if got != want {
				return fmt.Errorf("%s: seq %d raw %.20q, want seq %d", what, got.Seq, got.Raw, want.Seq)
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				s, want := a, t9
				if (g+i)%2 == 1 {
					s, want = b, t3
				}
				if err := check(s, want); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t5 := mustToken(t, sg, "x", 1, 5, "h")
	if d := mustAccept(t, b, Command{Device: "x", ID: "b5", Token: t5, Op: "set"}); d.Outcome != Accepted {
		t.Fatalf("store B (fence 3) refused seq 5: %v, fence seq %d", d.Outcome, d.Fence.Seq)
	}
	if d := mustAccept(t, a, Command{Device: "x", ID: "a5", Token: t5, Op: "set"}); d.Outcome != Stale {
		t.Fatalf("store A (fence 9) took seq 5: %v", d.Outcome)
	}
	if err := check(a, t9); err != nil {
		t.Fatal("A:", err)
	}
	if err := check(b, t5); err != nil {
		t.Fatal("B:", err)
	}
}

// A device and a domain of the same name, each in another domain's role:
// device "pump" belongs to domain "plant", and a domain named "pump" has
// its own fence (raised by a grant). Fences()["pump"] is the plant token,
// DomainFences()["pump"] the pump token, before and after a reopen, read
// repeatedly so that hits are taken; a command of domain pump to device
// pump is WrongDomain and changes nothing.
func TestAttack19DeviceAndDomainSameName(t *testing.T) {
	sg := testSigner(t)
	at := time.UnixMilli(1_700_000_000_777)
	opts := Options{Now: func() time.Time { return at }}
	path := filepath.Join(t.TempDir(), "fence.db")
	s := mustOpenPath(t, path, opts)
	plant := mustToken(t, sg, "plant", 2, 7, "h")
	pump := mustToken(t, sg, "pump", 3, 1, "g")
	mustAccept(t, s, Command{Device: "pump", ID: "c1", Token: plant, Op: "set"})
	mustAccept(t, s, Command{Device: "plant", ID: "c1", Token: plant, Op: "set"})
	if _, err := s.Raise(ctxT(t), pump); err != nil {
		t.Fatal(err)
	}
	verify := func(s *Store, when string) {
		t.Helper()
		for i := 0; i < 3; i++ {
			_, doms, devs := a19Seqs(t, s, "pump")
			a19Exact(t, when+": device pump", devs["pump"].Token, plant)
			a19Exact(t, when+": device plant", devs["plant"].Token, plant)
			a19Exact(t, when+": domain pump", doms["pump"].Token, pump)
			a19Exact(t, when+": domain plant", doms["plant"].Token, plant)
			tok, err := s.DomainFence("pump")
			if err != nil {
				t.Fatal(err)
			}
			a19Exact(t, when+": DomainFence pump", tok, pump)
		}
	}
	verify(s, "live")
	d := mustAccept(t, s, Command{Device: "pump", ID: "c2", Token: mustToken(t, sg, "pump", 3, 2, "g"), Op: "set"})
	if d.Outcome != WrongDomain {
		t.Fatalf("a pump-domain command to the plant device pump: %v", d.Outcome)
	}
	verify(s, "after WrongDomain")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	verify(mustOpenPath(t, path, opts), "reopened")
}

// The Raw a read returns is the wire token, on the decode path and the
// memo path alike, for tokens of every domain and holder length (Raw is
// cut out of the stored string; an off-by-one or a match elsewhere in it
// would show here), for device and domain fences, after the raise (encode
// path), after a memo clear (decode path) and on hits.
func TestAttack19RawIsTheWireToken(t *testing.T) {
	sg := testSigner(t)
	at := time.UnixMilli(1_700_000_000_999)
	opts := Options{Now: func() time.Time { return at }}
	path := filepath.Join(t.TempDir(), "fence.db")
	s := mustOpenPath(t, path, opts)
	want := map[string]fence.Token{}
	for _, n := range []int{1, 2, 3, 7, 64, 127, 128} {
		dom := fmt.Sprintf("%0*d", n, n)
		holder := fmt.Sprintf("h%0*d", n-1, 0)[:n]
		tok := mustToken(t, sg, dom, uint64(n), uint64(n)*3, holder)
		dev := "d" + dom
		if len(dev) > 128 {
			dev = dev[:128]
		}
		d := mustAccept(t, s, Command{Device: dev, ID: "c", Token: tok, Op: "set"})
		if d.Outcome != Accepted {
			t.Fatalf("%s: %v", dom, d.Outcome)
		}
		a19Exact(t, "decision of "+dom, d.Fence, tok)
		want[dom] = tok
		want["device "+dev] = tok
	}
	read := func(when string) {
		t.Helper()
		doms, err := s.DomainFences()
		if err != nil {
			t.Fatal(err)
		}
		devs, err := s.Fences()
		if err != nil {
			t.Fatal(err)
		}
		for k, tok := range want {
			if dev, ok := strings.CutPrefix(k, "device "); ok {
				a19Exact(t, when+" "+k, devs[dev].Token, tok)
				continue
			}
			a19Exact(t, when+" domain "+k, doms[k].Token, tok)
			got, err := s.DomainFence(k)
			if err != nil {
				t.Fatal(err)
			}
			a19Exact(t, when+" DomainFence "+k, got, tok)
		}
	}
	read("after raise")
	read("hit")
	fenceMemo.Lock()
	clear(fenceMemo.m)
	fenceMemo.Unlock()
	read("after clear")
	read("hit after clear")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpenPath(t, path, opts)
	read("reopened")
}

// Concurrent raisers (Accepts on 8 devices of one domain, and Raises),
// readers (Fences, DomainFences, DomainFence) and a flood of other slots
// that clears the memo again and again (-race): every token a reader gets
// is exactly a token that was signed (Raw and fields), the domain fence a
// reader sees never goes down, and at the end what the store answers
// in-process equals what a crash copy and a clean reopen answer.
func TestAttack19ConcurrentRaisersReadersMemoClears(t *testing.T) {
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	s := mustOpenPath(t, path, Options{})
	const n = 300
	toks := make([]fence.Token, n+1)
	for i := 1; i <= n; i++ {
		toks[i] = mustToken(t, sg, "dom", 1, uint64(i), "h")
	}
	floodBytes, err := encodeFence(domainSlot("flood-seed"), Fence{Token: toks[1], RaisedAt: time.UnixMilli(1)})
	if err != nil {
		t.Fatal(err)
	}
	var bad atomic.Value
	report := func(format string, a ...any) { bad.CompareAndSwap(nil, fmt.Sprintf(format, a...)) }
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	var flooded atomic.Int64
	go func() { // flood: distinct slots past the bound, so the memo clears
		defer bg.Done()
		for i := 0; ; i++ {
			flooded.Store(int64(i))
			select {
			case <-stop:
				return
			default:
			}
			if _, err := decodeFence(deviceSlot(fmt.Sprint("flood", i)), floodBytes); err != nil {
				report("flood: %v", err)
				return
			}
		}
	}()
	checkTok := func(what string, tok fence.Token) bool {
		if tok.IsZero() {
			return true
		}
		if tok.Seq < 1 || tok.Seq > n || tok != toks[tok.Seq] {
			report("%s: token seq %d is not the signed one (raw %.24q)", what, tok.Seq, tok.Raw)
			return false
		}
		return true
	}
	for r := 0; r < 4; r++ {
		bg.Add(1)
		go func(r int) {
			defer bg.Done()
			var last uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				tok, err := s.DomainFence("dom")
				if err != nil {
					report("reader: %v", err)
					return
				}
				if !checkTok("DomainFence", tok) {
					return
				}
				if tok.Seq < last {
					report("DomainFence went down from %d to %d", last, tok.Seq)
					return
				}
				last = tok.Seq
				doms, err := s.DomainFences()
				if err != nil {
					report("DomainFences: %v", err)
					return
				}
				if !checkTok("DomainFences", doms["dom"].Token) {
					return
				}
				if doms["dom"].Token.Seq < last {
					report("DomainFences seq %d under the durable %d read before it", doms["dom"].Token.Seq, last)
					return
				}
				devs, err := s.Fences()
				if err != nil {
					report("Fences: %v", err)
					return
				}
				for dev, f := range devs {
					if !checkTok("Fences "+dev, f.Token) {
						return
					}
				}
			}
		}(r)
	}
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		if i%50 == 0 { // let the flood clear the memo between raises
			for start := flooded.Load(); flooded.Load() < start+fenceMemoMax/4; {
				time.Sleep(time.Millisecond)
			}
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var d Decision
			var err error
			if i%4 == 0 {
				d, err = s.Raise(ctxT(t), toks[i])
			} else {
				d, err = s.Accept(ctxT(t), Command{Device: fmt.Sprint("dev", i%8), ID: fmt.Sprint("c", i), Token: toks[i], Op: "set"})
			}
			if err != nil {
				report("seq %d: %v", i, err)
				return
			}
			if d.Outcome != Accepted {
				return
			}
			got, err := s.DomainFence("dom")
			if err != nil {
				report("seq %d: DomainFence: %v", i, err)
				return
			}
			if cmp, _ := got.Compare(toks[i]); cmp < 0 {
				report("seq %d accepted and returned; DomainFence then says %d", i, got.Seq)
			}
		}(i)
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
	if f := flooded.Load(); f <= fenceMemoMax {
		t.Fatalf("scene: the flood decoded %d slots, want more than %d (a clear)", f, fenceMemoMax)
	}
	fenceMemo.Lock()
	size := len(fenceMemo.m)
	fenceMemo.Unlock()
	if size > fenceMemoMax {
		t.Fatalf("memo holds %d entries, bound %d", size, fenceMemoMax)
	}
	liveDur, liveDoms, liveDevs := a19Seqs(t, s, "dom")
	cp := walCrashCopy(t, path, t.TempDir())
	c := mustOpenPath(t, cp, Options{})
	cDur, cDoms, cDevs := a19Seqs(t, c, "dom")
	if liveDur != cDur || liveDoms["dom"] != cDoms["dom"] || len(liveDevs) != len(cDevs) {
		t.Fatalf("crash copy: durable %d/%d, domain %+v / %+v", liveDur, cDur, liveDoms["dom"].Token, cDoms["dom"].Token)
	}
	for dev, f := range liveDevs {
		if cDevs[dev] != f {
			t.Fatalf("crash copy: device %s %+v, live %+v", dev, cDevs[dev].Token, f.Token)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := mustOpenPath(t, path, Options{})
	rDur, rDoms, rDevs := a19Seqs(t, r, "dom")
	if rDur != liveDur || rDoms["dom"] != liveDoms["dom"] || len(rDevs) != len(liveDevs) {
		t.Fatalf("reopen: durable %d/%d", rDur, liveDur)
	}
	for dev, f := range liveDevs {
		if rDevs[dev] != f {
			t.Fatalf("reopen: device %s %+v, live %+v", dev, rDevs[dev].Token, f.Token)
		}
	}
}

// A crash copy taken mid-stream (SIGKILL-like: the file and its log as
// they are) is opened in the same process after the live store has moved
// on, so every slot's memo entry holds the live store's later bytes. The
// copy answers what was acknowledged before it was taken — no more (the
// live raises after it were never durable in it) and no less — a command
// between the two fences is accepted by the copy, and one under the
// copy's fence is stale. I2, I3, I4.
func TestAttack19CrashCopyWithWarmMemo(t *testing.T) {
	sg := testSigner(t)
	at := time.UnixMilli(1_700_000_001_000)
	opts := Options{Now: func() time.Time { return at }}
	path := filepath.Join(t.TempDir(), "fence.db")
	s := mustOpenPath(t, path, opts)
	for i := 1; i <= 10; i++ {
		mustAccept(t, s, Command{Device: "d", ID: fmt.Sprint("c", i), Token: mustToken(t, sg, "dom", 1, uint64(i), "h"), Op: "set"})
	}
	cp := walCrashCopy(t, path, t.TempDir())
	for i := 11; i <= 30; i++ {
		mustAccept(t, s, Command{Device: "d", ID: fmt.Sprint("c", i), Token: mustToken(t, sg, "dom", 1, uint64(i), "h"), Op: "set"})
	}
	if e, ok := a19Memo(domainSlot("dom")); !ok || e.f.Token.Seq != 30 {
		t.Fatalf("scene: memo of dom %v %d, want the live seq 30", ok, e.f.Token.Seq)
	}
	c := mustOpenPath(t, cp, opts)
	dur, doms, devs := a19Seqs(t, c, "dom")
	if dur != 10 || doms["dom"].Token.Seq != 10 || devs["d"].Token.Seq != 10 {
		t.Fatalf("crash copy at seq 10 reads durable %d, domain %d, device %d", dur, doms["dom"].Token.Seq, devs["d"].Token.Seq)
	}
	if d := mustAccept(t, c, Command{Device: "d", ID: "x20", Token: mustToken(t, sg, "dom", 1, 20, "h"), Op: "set"}); d.Outcome != Accepted {
		t.Fatalf("copy (fence 10) and seq 20: %v", d.Outcome)
	}
	if d := mustAccept(t, c, Command{Device: "e", ID: "x15", Token: mustToken(t, sg, "dom", 1, 15, "h"), Op: "set"}); d.Outcome != Stale {
		t.Fatalf("copy (fence 20) and seq 15: %v", d.Outcome)
	}
	if d := mustAccept(t, s, Command{Device: "d", ID: "y25", Token: mustToken(t, sg, "dom", 1, 25, "h"), Op: "set"}); d.Outcome != Stale {
		t.Fatalf("live (fence 30) and seq 25 after the copy's raises: %v", d.Outcome)
	}
	if r, ok, err := c.Lookup("d", "c10"); err != nil || !ok || r.Token.Seq != 10 {
		t.Fatalf("acknowledged c10 in the copy: %+v %v %v", r, ok, err)
	}
}

// Bad stored bytes get a clear error and are never answered from the memo,
// even when the slot's entry holds a good fence and the bad bytes differ
// from the good ones by one byte; a failed decode does not replace or
// poison the slot's entry, and the good bytes still decode to it.
func TestAttack19CorruptBytesNeverHit(t *testing.T) {
	sg := testSigner(t)
	tok := mustToken(t, sg, "dom", 1, 4, "h")
	slot := domainSlot("a19-corrupt")
	good, err := encodeFence(slot, Fence{Token: tok, RaisedAt: time.UnixMilli(42)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x01
		f, err := decodeFence(slot, bad)
		if err == nil {
			want, perr := parseFence("x", bad)
			if perr != nil || f != want {
				t.Fatalf("byte %d flipped: memo answered %+v, parse says %+v %v", i, f.Token, want.Token, perr)
			}
			continue
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v, want ErrCorrupt", i, err)
		}
	}
	f, err := decodeFence(slot, good)
	if err != nil || f.Token != tok || !f.RaisedAt.Equal(time.UnixMilli(42)) {
		t.Fatalf("good bytes after the corrupt ones: %+v %v", f, err)
	}
}
