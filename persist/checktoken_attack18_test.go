package persist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/fencegate/fencegate/fence"
)

// a18ClearMemo forgets the process-wide fence memo, as a process restart does.
func a18ClearMemo() {
	fenceMemo.Lock()
	clear(fenceMemo.m)
	fenceMemo.Unlock()
}

// a18Dump is every key and value of a closed store file, bucket by
// bucket (nested buckets included): what "changes nothing" is checked on.
func a18Dump(t *testing.T, path string) string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var lines []string
	var walk func(prefix string, b *bolt.Bucket) error
	walk = func(prefix string, b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(prefix+fmt.Sprintf("%q/", k), b.Bucket(k))
			}
			lines = append(lines, fmt.Sprintf("%s%q=%q", prefix, k, v))
			return nil
		})
	}
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if string(name) == "groupcommit-log" { // the log's generation moves at every open
				return nil
			}
			return walk(fmt.Sprintf("%q/", name), b)
		})
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// a18Lies are tokens that carry a genuine Raw (or a near copy of one) with
// fields that are not what that Raw decodes to, one disagreement each.
func a18Lies(t *testing.T, g, other fence.Token) map[string]fence.Token {
	lies := map[string]fence.Token{}
	add := func(name string, f func(*fence.Token)) {
		l := g
		f(&l)
		lies[name] = l
	}
	add("domain", func(l *fence.Token) {
		if l.Domain = "mill"; g.Domain == "mill" {
			l.Domain = "plant"
		}
	})
	add("epoch+1", func(l *fence.Token) { l.Epoch++ })
	add("seq-1", func(l *fence.Token) { l.Seq-- })
	add("seq+1", func(l *fence.Token) { l.Seq++ })
	add("seq max", func(l *fence.Token) { l.Seq = ^uint64(0) })
	add("holder", func(l *fence.Token) { l.Holder += "x" })
	add("issued_at", func(l *fence.Token) { l.IssuedAt++ })
	add("ttl", func(l *fence.Token) { l.TTLms++ })
	add("key_id", func(l *fence.Token) { l.KeyID[0] ^= 1 })
	add("raw of another lease", func(l *fence.Token) { l.Raw = other.Raw })
	add("fields of another lease", func(l *fence.Token) { raw := l.Raw; *l = other; l.Raw = raw })
	add("raw + LF", func(l *fence.Token) { l.Raw += "\n" })
	add("raw + CRLF inside", func(l *fence.Token) { l.Raw = l.Raw[:10] + "\r\n" + l.Raw[10:] })
	add("raw + U+2028", func(l *fence.Token) { l.Raw = l.Raw[:10] + "\u2028" + l.Raw[10:] })
	add("raw overlong dot", func(l *fence.Token) {
		i := strings.LastIndexByte(l.Raw, '.')
		l.Raw = l.Raw[:i] + "\xc0\xae" + l.Raw[i+1:]
	})
	add("raw + NUL", func(l *fence.Token) { l.Raw += "\x00" })
	add("raw prefix upper", func(l *fence.Token) { l.Raw = "FG1." + l.Raw[4:] })
	add("raw padded", func(l *fence.Token) { l.Raw += "==" })
	add("raw quoted", func(l *fence.Token) { l.Raw = `"` + l.Raw + `"` })
	return lies
}

// Every way a token's fields can disagree with its wire form is refused
// by Raise and by Accept (also as a "retry" of a journaled id, and for a
// device never seen) with ErrInvalid, and changes nothing: the fence read
// in-process stays the genuine one, the file holds byte for byte what it
// held before, and after a restart the fence admits exactly what it
// admitted before (I1/I2, I6).
func TestAttack18EveryFieldLieRefused(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	opts := Options{Now: func() time.Time { return at }}
	path := filepath.Join(t.TempDir(), "fence.db")
	sg := testSigner(t)
	g5 := mustToken(t, sg, "plant", 1, 5, "a")
	g9 := mustToken(t, sg, "plant", 1, 9, "b")

	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Raise(ctxT(t), g5); err != nil {
		t.Fatal(err)
	}
	mustAccept(t, s, Command{Device: "d1", ID: "c1", Token: g5, Op: "op", Args: []byte(`{"x":1}`)})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// An open marks c1 in doubt; the baseline is the file after one.
	if s, err = Open(path, opts); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	dump0 := a18Dump(t, path)

	s, err = Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	for name, lie := range a18Lies(t, g5, g9) {
		if _, err := s.Raise(ctxT(t), lie); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Raise error %v, want ErrInvalid", name, err)
		}
		for _, cmd := range []Command{
			{Device: "d1", ID: "c1", Token: lie, Op: "op", Args: []byte(`{"x":1}`)}, // a "retry" of c1
			{Device: "d1", ID: "n-" + name, Token: lie, Op: "op"},
			{Device: "d9", ID: "n-" + name, Token: lie, Op: "op"},
		} {
			if d, err := s.Accept(ctxT(t), cmd); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: Accept %s/%s: %+v, %v, want ErrInvalid", name, cmd.Device, cmd.ID, d.Outcome, err)
			}
		}
		if f, err := s.DomainFence("plant"); err != nil || f != g5 {
			t.Fatalf("%s: domain fence %v (%v), want the genuine %v", name, f, err, g5)
		}
		if f, err := s.DomainFence("mill"); err != nil || !f.IsZero() {
			t.Fatalf("%s: domain mill has fence %v (%v), want none", name, f, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if dump1 := a18Dump(t, path); dump1 != dump0 {
		t.Fatalf("refused tokens changed the file:\nbefore\n%s\nafter\n%s", dump0, dump1)
	}

	a18ClearMemo()
	s = mustOpenPath(t, path, opts)
	if f, err := s.DomainFence("plant"); err != nil || f != g5 {
		t.Fatalf("after restart: domain fence %v (%v), want %v", f, err, g5)
	}
	if d := mustAccept(t, s, Command{Device: "d1", ID: "c4", Token: mustToken(t, sg, "plant", 1, 4, "a"), Op: "op"}); d.Outcome != Stale {
		t.Fatalf("seq 4 below the fence at 5: %v", d.Outcome)
	}
	if d := mustAccept(t, s, Command{Device: "d1", ID: "c5", Token: g5, Op: "op"}); d.Outcome != Accepted || d.Raised {
		t.Fatalf("the fence's own lease: %v raised %v", d.Outcome, d.Raised)
	}
	if d := mustAccept(t, s, Command{Device: "d1", ID: "c1", Token: g5, Op: "op", Args: []byte(`{ "x" : 1 }`)}); d.Outcome != Duplicate {
		t.Fatalf("retry of c1: %v", d.Outcome)
	}
	if d := mustAccept(t, s, Command{Device: "d1", ID: "c6", Token: mustToken(t, sg, "plant", 1, 6, "c"), Op: "op"}); d.Outcome != Accepted || !d.Raised {
		t.Fatalf("seq 6 above the fence at 5: %v raised %v", d.Outcome, d.Raised)
	}
}

// Two stores in one process share the memo, and write the same bytes for
// the same token at the same time. Store B, whose fence is 5, must not be
// answered from an entry A made (A's fence moves to 7): a seq-6 command
// is accepted by B and refused by A, before and after a restart.
func TestAttack18MemoSharedBytesAcrossStores(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	opts := Options{Now: func() time.Time { return at }}
	sg := testSigner(t)
	tok := func(seq uint64) fence.Token { return mustToken(t, sg, "plant", 1, seq, "h") }
	pa, pb := filepath.Join(t.TempDir(), "a.db"), filepath.Join(t.TempDir(), "b.db")
	a, err := Open(pa, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(pb, opts)
	if err != nil {
		t.Fatal(err)
	}
	mustAccept(t, a, Command{Device: "d1", ID: "a5", Token: tok(5), Op: "op"})
	mustAccept(t, b, Command{Device: "d1", ID: "b3", Token: tok(3), Op: "op"})
	mustAccept(t, b, Command{Device: "d1", ID: "b5", Token: tok(5), Op: "op"}) // the bytes A wrote
	mustAccept(t, a, Command{Device: "d1", ID: "a7", Token: tok(7), Op: "op"})
	check := func(when string) {
		if f, _ := a.DomainFence("plant"); f.Seq != 7 {
			t.Fatalf("%s: A's fence at %d, want 7", when, f.Seq)
		}
		if f, _ := b.DomainFence("plant"); f.Seq != 5 {
			t.Fatalf("%s: B's fence at %d, want 5", when, f.Seq)
		}
		if fs, _ := b.Fences(); fs["d1"].Token.Seq != 5 {
			t.Fatalf("%s: B's device fence at %d, want 5", when, fs["d1"].Token.Seq)
		}
	}
	check("before")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	a18ClearMemo()
	a, b = mustOpenPath(t, pa, opts), mustOpenPath(t, pb, opts)
	check("after restart")
	if d := mustAccept(t, a, Command{Device: "d1", ID: "x6", Token: tok(6), Op: "op"}); d.Outcome != Stale {
		t.Fatalf("A: seq 6 under fence 7: %v", d.Outcome)
	}
	if d := mustAccept(t, b, Command{Device: "d1", ID: "x6", Token: tok(6), Op: "op"}); d.Outcome != Accepted || !d.Raised {
		t.Fatalf("B: seq 6 over fence 5: %v", d.Outcome)
	}
}

// A model of the domain fence under random raises, accepts, lies and
// restarts (the memo cleared at each): every decision is the model's,
// every refused lie changes nothing, and the fence read in-process is
// always the one the file gives after a restart.
func TestAttack18FenceModelWithLiesAndRestarts(t *testing.T) {
	root := t.TempDir()
	sg := testSigner(t)
	other := fence.Token{Domain: "plant", Epoch: 1, Seq: 1, Holder: "z", IssuedAt: 1, TTLms: 1}
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(root, "m")
		if err != nil {
			rt.Fatal(err)
		}
		path := filepath.Join(dir, "fence.db")
		opts := Options{} // the real clock: raise times with sub-millisecond parts and a monotonic reading
		s, err := Open(path, opts)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		model := map[string]fence.Token{}
		id := 0
		for range rapid.IntRange(1, 25).Draw(rt, "ops") {
			dom := rapid.SampledFrom([]string{"plant", "mill"}).Draw(rt, "dom")
			g := fencetestToken(rt, sg, dom,
				rapid.Uint64Range(1, 2).Draw(rt, "epoch"), rapid.Uint64Range(1, 6).Draw(rt, "seq"),
				rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "holder"))
			switch op := rapid.IntRange(0, 4).Draw(rt, "op"); op {
			case 0, 1: // genuine raise or accept
				var d Decision
				if op == 0 {
					d, err = s.Raise(ctxT(t), g)
				} else {
					id++
					dev := map[string]string{"plant": "d1", "mill": "d2"}[dom]
					d, err = s.Accept(ctxT(t), Command{Device: dev, ID: fmt.Sprint("c", id), Token: g, Op: "op"})
				}
				if err != nil {
					rt.Fatal(err)
				}
				want := Accepted
				f, ok := model[dom]
				if ok {
					switch c, _ := g.Compare(f); {
					case c < 0:
						want = Stale
					case c == 0 && !g.SameLease(f):
						want = Conflict
					}
				}
				if d.Outcome != want {
					rt.Fatalf("%v against fence %v: %v, model %v", g, f, d.Outcome, want)
				}
				if want == Accepted && (!ok || g.Fence() != f.Fence()) {
					model[dom] = g
				}
			case 2: // a lie
				lies := a18Lies(t, g, fencetestSign(rt, sg, other))
				names := make([]string, 0, len(lies))
				for n := range lies {
					names = append(names, n)
				}
				sort.Strings(names)
				lie := lies[rapid.SampledFrom(names).Draw(rt, "lie")]
				if _, err := s.Raise(ctxT(t), lie); !errors.Is(err, ErrInvalid) {
					rt.Fatalf("lie %+v raised: %v", lie, err)
				}
				if _, err := s.Accept(ctxT(t), Command{Device: "d1", ID: "lie", Token: lie, Op: "op"}); !errors.Is(err, ErrInvalid) {
					rt.Fatalf("lie %+v accepted: %v", lie, err)
				}
			case 3, 4: // restart: what the store answered is what its file holds
				devs, err1 := s.Fences()
				doms, err2 := s.DomainFences()
				if err1 != nil || err2 != nil {
					rt.Fatal(err1, err2)
				}
				if err := s.Close(); err != nil {
					rt.Fatal(err)
				}
				a18ClearMemo()
				if s, err = Open(path, opts); err != nil {
					rt.Fatal(err)
				}
				devs2, _ := s.Fences()
				doms2, _ := s.DomainFences()
				for _, pair := range [][2]map[string]Fence{{devs, devs2}, {doms, doms2}} {
					if len(pair[0]) != len(pair[1]) {
						rt.Fatalf("fences before restart %v, after %v", pair[0], pair[1])
					}
					for k, v := range pair[0] {
						if pair[1][k] != v {
							rt.Fatalf("%s: before restart %+v, after %+v", k, v, pair[1][k])
						}
					}
				}
			}
			for _, d := range []string{"plant", "mill"} {
				f, err := s.DomainFence(d)
				if err != nil || f != model[d] {
					rt.Fatalf("domain %s fence %v (%v), model %v", d, f, err, model[d])
				}
			}
		}
	})
}

func fencetestToken(t *rapid.T, s *fence.Signer, domain string, epoch, seq uint64, holder string) fence.Token {
	return fencetestSign(t, s, fence.Token{Domain: domain, Epoch: epoch, Seq: seq, Holder: holder,
		IssuedAt: int64(epoch*1000 + seq), TTLms: 10000})
}

func fencetestSign(t *rapid.T, s *fence.Signer, tok fence.Token) fence.Token {
	signed, err := s.Sign(tok)
	if err != nil {
		t.Fatalf("sign %+v: %v", tok, err)
	}
	return signed
}
