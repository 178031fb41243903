package persist

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/groupcommit"
)

// a15Lie is a token whose fields are not what its Raw decodes to: Raw is
// the genuine seq-5 token, Seq says 9. Before checkToken compared the two,
// Accept and Raise took it, answered from the fields (memo: seq 9) and
// stored Raw (seq 5), so the fence moved back to 5 at the next restart.
func a15Lie(t *testing.T) (genuine, lie fence.Token) {
	s := testSigner(t)
	genuine = mustToken(t, s, "plant", 1, 5, "a")
	lie = genuine
	lie.Seq = 9
	return genuine, lie
}

// A token whose fields disagree with its wire form is refused, by Raise
// and by Accept, and changes nothing: the fence the store answers before a
// restart is the one it answers after it, and a seq-7 token is accepted on
// both sides of the restart.
func TestAttack15MemoAnswerSurvivesReopen(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	opts := Options{Now: func() time.Time { return at }}
	path := filepath.Join(t.TempDir(), "fence.db")
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	genuine, lie := a15Lie(t)
	if _, err := s.Raise(ctxT(t), genuine); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Raise(ctxT(t), lie); !errors.Is(err, ErrInvalid) {
		t.Fatalf("raise with fields that disagree with Raw: err %v, want ErrInvalid", err)
	}
	if _, err := s.Accept(ctxT(t), Command{Device: "d1", ID: "c0", Token: lie, Op: "op"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("accept with fields that disagree with Raw: err %v, want ErrInvalid", err)
	}
	before, err := s.DomainFence("plant")
	if err != nil {
		t.Fatal(err)
	}
	if before.Seq != genuine.Seq {
		t.Fatalf("domain fence at seq %d after the refused raise, want %d", before.Seq, genuine.Seq)
	}
	t7 := mustToken(t, testSigner(t), "plant", 1, 7, "b")
	if d := mustAccept(t, s, Command{Device: "d1", ID: "c1", Token: t7, Op: "op"}); d.Outcome != Accepted {
		t.Fatalf("seq 7 above the fence at 5: %v", d.Outcome)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fenceMemo.Lock()
	clear(fenceMemo.m) // the memo does not outlive the process: a restart
	fenceMemo.Unlock()
	s = mustOpenPath(t, path, opts)
	after, err := s.DomainFence("plant")
	if err != nil {
		t.Fatal(err)
	}
	if after.Seq != t7.Seq {
		t.Fatalf("domain fence after reopen at seq %d, want %d", after.Seq, t7.Seq)
	}
}

// The memo is process-wide and keyed by stored bytes only, so one store's
// bad input must never reach it: store A refuses the lie, and store B,
// whose file durably holds the genuine seq-5 fence, reads seq 5.
func TestAttack15MemoCrossStorePoisoning(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	opts := Options{Now: func() time.Time { return at }}
	genuine, lie := a15Lie(t)

	pathB := filepath.Join(t.TempDir(), "b.db")
	b, err := Open(pathB, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Raise(ctxT(t), genuine); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	fenceMemo.Lock()
	clear(fenceMemo.m) // as after a process restart
	fenceMemo.Unlock()

	a := mustOpen(t, opts)
	if _, err := a.Raise(ctxT(t), lie); !errors.Is(err, ErrInvalid) {
		t.Fatalf("store A raised a token whose fields disagree with Raw: err %v", err)
	}
	b = mustOpenPath(t, pathB, opts)
	got, err := b.DomainFence("plant")
	if err != nil {
		t.Fatal(err)
	}
	want, err := parseFenceOfStore(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != genuine.Seq || got != want {
		t.Fatalf("store B's durable fence is %v (seq %d) but it reads %v (seq %d)", want, want.Seq, got, got.Seq)
	}
}

// parseFenceOfStore parses store s's stored "plant" domain fence bytes
// without the memo.
func parseFenceOfStore(t *testing.T, s *Store) (fence.Token, error) {
	t.Helper()
	var tok fence.Token
	err := s.view(func(tx *groupcommit.Tx) error {
		v := tx.Bucket(bucketDomains).Get([]byte("plant"))
		f, err := parseFence("plant", v)
		tok = f.Token
		return err
	})
	return tok, err
}

// With genuine (Sign/Verify) tokens the memo is exact: for every raise time
// (negative, sub-millisecond, with a monotonic reading, another location)
// what encodeFence remembers equals what parsing the bytes gives, for a
// device and a domain fence alike.
func TestAttack15MemoExactForGenuineTokens(t *testing.T) {
	s := testSigner(t)
	ring, err := fence.NewKeyRing(0, s.Public())
	if err != nil {
		t.Fatal(err)
	}
	loc := time.FixedZone("x", 3600+1800)
	times := []time.Time{
		time.Now(), time.Now().In(loc), time.Unix(0, 0), time.Unix(-1, 999_999_999),
		time.UnixMilli(-12345).Add(700 * time.Microsecond), time.Date(2200, 1, 1, 0, 0, 0, 1, time.UTC), {},
	}
	for i, at := range times {
		for _, dom := range []string{"plant", "x.y-z_9"} {
			raw := mustToken(t, s, dom, uint64(i+1), uint64(1<<40+i), "holder-"+fmt.Sprint(i))
			tok, err := ring.Verify(raw.Raw)
			if err != nil {
				t.Fatal(err)
			}
			b, err := encodeFence(domainSlot(dom), Fence{Token: tok, RaisedAt: at})
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeFence(domainSlot(dom), b)
			want, perr := parseFence("d", b)
			if err != nil || perr != nil || got != want {
				t.Fatalf("time %v domain %s: memo %+v (%v), parse %+v (%v)", at, dom, got, err, want, perr)
			}
		}
	}
}

// The encode path respects the memo's bound: a flood of distinct raises
// never holds more than fenceMemoMax entries.
func TestAttack15MemoBoundedOnEncode(t *testing.T) {
	s := testSigner(t)
	tok := mustToken(t, s, "plant", 1, 1, "a")
	for i := range 3*fenceMemoMax + 7 {
		if _, err := encodeFence(deviceSlot(fmt.Sprint("d", i)), Fence{Token: tok, RaisedAt: time.UnixMilli(int64(i))}); err != nil {
			t.Fatal(err)
		}
		if i%512 == 0 {
			fenceMemo.Lock()
			n := len(fenceMemo.m)
			fenceMemo.Unlock()
			if n > fenceMemoMax {
				t.Fatalf("memo holds %d after %d encodes, bound %d", n, i+1, fenceMemoMax)
			}
		}
	}
}

// Concurrent accepts on several devices of two domains (run with -race):
// what the store reports in-process equals what it holds after a reopen.
func TestAttack15MemoConcurrentAcceptsMatchReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sg := testSigner(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dom := []string{"plant", "yard"}[g%2]
			for i := range 40 {
				tok := mustToken(t, sg, dom, 1, uint64(i*4+g+1), "h")
				if _, err := st.Accept(ctxT(t), Command{Device: fmt.Sprintf("d%d", g), ID: fmt.Sprintf("c%d", i), Token: tok, Op: "op"}); err != nil {
					t.Error(err)
					return
				}
				if _, err := st.DomainFence(dom); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	devBefore, err := st.Fences()
	if err != nil {
		t.Fatal(err)
	}
	domBefore, err := st.DomainFences()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	fenceMemo.Lock()
	clear(fenceMemo.m)
	fenceMemo.Unlock()
	st = mustOpenPath(t, path, Options{})
	devAfter, _ := st.Fences()
	domAfter, _ := st.DomainFences()
	for k, v := range devBefore {
		if devAfter[k] != v {
			t.Errorf("device %s: before %+v after %+v", k, v, devAfter[k])
		}
	}
	for k, v := range domBefore {
		if domAfter[k] != v {
			t.Errorf("domain %s: before %+v after %+v", k, v, domAfter[k])
		}
	}
	if len(devAfter) != len(devBefore) || len(domAfter) != len(domBefore) {
		t.Errorf("fence counts changed across reopen: %d/%d -> %d/%d", len(devBefore), len(domBefore), len(devAfter), len(domAfter))
	}
}
