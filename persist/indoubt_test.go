package persist

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// openWithInDoubt journals three commands of device p and reopens the store
// as after a crash: "a" (op set, args) and "b" are in doubt, "c" is done.
func openWithInDoubt(t *testing.T) (*Store, string) {
	t.Helper()
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok := mustToken(t, sg, "plant", 3, 9, "sup-a")
	mustAccept(t, s, Command{Device: "p", ID: "a", Token: tok, Op: "set", Args: []byte(`{ "value": 42 }`)})
	mustAccept(t, s, Command{Device: "p", ID: "b", Token: tok, Op: "stop"})
	mustAccept(t, s, Command{Device: "p", ID: "c", Token: tok, Op: "stop"})
	if err := s.Complete(ctxT(t), "p", "c", []byte("r")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return mustOpenPath(t, path, Options{}), path
}

func TestInDoubtListShowsCommand(t *testing.T) {
	s, _ := openWithInDoubt(t)
	got, err := s.InDoubt()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Record.ID != "a" || got[1].Record.ID != "b" {
		t.Fatalf("in doubt: %+v, want p/a and p/b", got)
	}
	a := got[0]
	if a.Device != "p" || a.Record.Op != "set" || string(a.Record.Args) != `{"value":42}` ||
		a.Record.Token.Holder != "sup-a" || a.Record.Token.Seq != 9 || a.Record.AcceptedAt.IsZero() {
		t.Fatalf("in-doubt entry: %+v", a)
	}
	if c, _ := s.InDoubtCounts(); c["p"] != 2 || len(c) != 1 {
		t.Fatalf("counts: %v", c)
	}
}

func TestResolveIsDurableAndAnswersRetries(t *testing.T) {
	s, path := openWithInDoubt(t)
	rec, err := s.Resolve(ctxT(t), "p", "a", Resolution{Applied: true, By: "jo"}, []byte("resolved-answer"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != StateResolved || rec.Resolution == nil || !rec.Resolution.Applied || rec.Resolution.By != "jo" || rec.Resolution.At.IsZero() {
		t.Fatalf("resolved record: %+v", rec)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpenPath(t, path, Options{})
	got, _ := s2.InDoubt()
	if len(got) != 1 || got[0].Record.ID != "b" {
		t.Fatalf("in doubt after resolve and reopen: %+v, want only p/b", got)
	}
	r, ok, err := s2.Lookup("p", "a")
	if err != nil || !ok || r.State != StateResolved || r.Resolution.By != "jo" || !r.Resolution.At.Equal(rec.Resolution.At) {
		t.Fatalf("resolution after reopen: %+v %v %v", r, ok, err)
	}
	d := mustAccept(t, s2, Command{Device: "p", ID: "a", Token: mustToken(t, testSigner(t), "plant", 3, 9, "sup-a"),
		Op: "set", Args: []byte(`{"value":42}`)})
	if d.Outcome != Duplicate || !bytes.Equal(d.Record.Result, []byte("resolved-answer")) {
		t.Fatalf("retry after resolve: %v %q", d.Outcome, d.Record.Result)
	}
}

func TestResolveRefusesWhatIsNotInDoubt(t *testing.T) {
	s, _ := openWithInDoubt(t)
	for _, tc := range []struct {
		name, device, id, by string
		want                 error
	}{
		{"done command", "p", "c", "jo", ErrNotInDoubt},
		{"unknown command", "p", "zz", "jo", ErrNotInDoubt},
		{"unknown device", "q", "a", "jo", ErrNotInDoubt},
		{"bad device id", "p/x", "a", "jo", ErrInvalid},
		{"no resolver", "p", "a", "", ErrInvalid},
		{"resolver with a newline", "p", "a", "jo\nlevel=ERROR", ErrInvalid},
		{"resolver not utf-8", "p", "a", "jo\xff", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Resolve(ctxT(t), tc.device, tc.id, Resolution{By: tc.by}, nil); !errors.Is(err, tc.want) {
				t.Fatalf("resolve: %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := s.Resolve(ctxT(t), "p", "b", Resolution{By: "jo"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(ctxT(t), "p", "b", Resolution{Applied: true, By: "kim"}, nil); !errors.Is(err, ErrNotInDoubt) {
		t.Fatalf("second resolve: %v, want ErrNotInDoubt", err)
	}
	if r, _, _ := s.Lookup("p", "b"); r.Resolution.Applied || r.Resolution.By != "jo" {
		t.Fatalf("second resolve changed the first: %+v", r.Resolution)
	}
	if got, _ := s.InDoubt(); len(got) != 1 || got[0].Record.ID != "a" {
		t.Fatalf("refused resolves changed the list: %+v", got)
	}
}

func TestCompleteInDoubtIsListed(t *testing.T) {
	s := mustOpen(t, Options{})
	tok := mustToken(t, testSigner(t), "plant", 1, 1, "A")
	mustAccept(t, s, Command{Device: "p", ID: "x", Token: tok, Op: "set"})
	mustAccept(t, s, Command{Device: "p", ID: "y", Token: tok, Op: "set"})
	if err := s.CompleteInDoubt(ctxT(t), "p", "x", []byte("doubt")); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctxT(t), "p", "y", []byte("ok")); err != nil {
		t.Fatal(err)
	}
	got, _ := s.InDoubt()
	if len(got) != 1 || got[0].Record.ID != "x" || got[0].Record.State != StateDone {
		t.Fatalf("in doubt: %+v, want p/x (done with an in-doubt result)", got)
	}
}

func TestReacceptedIdempotentLeavesList(t *testing.T) {
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	s, _ := Open(path, Options{})
	tok := mustToken(t, sg, "plant", 1, 1, "A")
	mustAccept(t, s, Command{Device: "p", ID: "x", Token: tok, Idempotent: true})
	s.Close()
	s2 := mustOpenPath(t, path, Options{})
	if got, _ := s2.InDoubt(); len(got) != 1 {
		t.Fatalf("in doubt after reopen: %+v", got)
	}
	mustAccept(t, s2, Command{Device: "p", ID: "x", Token: tok})
	if got, _ := s2.InDoubt(); len(got) != 0 {
		t.Fatalf("re-accepted idempotent command still listed: %+v", got)
	}
}

// TestInDoubtLeavesListByCountNotAge: an open in-doubt command outlives
// MaxAge (it may have been in the driver longer than that when the agent
// stopped, and its retry must still be answered in_doubt), and leaves the
// journal and the list only when MaxRecords newer commands push it out.
func TestInDoubtLeavesListByCountNotAge(t *testing.T) {
	var up time.Duration
	sg := testSigner(t)
	tok := mustToken(t, sg, "plant", 1, 1, "A")
	path := filepath.Join(t.TempDir(), "fence.db")
	s, _ := Open(path, Options{})
	mustAccept(t, s, Command{Device: "p", ID: "x", Token: tok})
	s.Close()
	s2 := mustOpenPath(t, path, Options{MaxRecords: 2, MaxAge: time.Hour, Uptime: func() time.Duration { return up }})
	up = 2 * time.Hour
	if err := s2.Prune(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if r, ok, _ := s2.Lookup("p", "x"); !ok || r.State != StateInDoubt {
		t.Fatalf("open in-doubt command pruned by age: %+v, %v", r, ok)
	}
	for _, id := range []string{"y", "z"} {
		mustAccept(t, s2, Command{Device: "p", ID: id, Token: tok})
		if err := s2.Complete(ctxT(t), "p", id, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := s2.Lookup("p", "x"); ok {
		t.Fatal("in-doubt command not pruned with 2 newer commands over MaxRecords 2")
	}
	if got, _ := s2.InDoubt(); len(got) != 0 {
		t.Fatalf("pruned in-doubt command still listed: %+v", got)
	}
}

func TestBackupWhileServingOpensWithFences(t *testing.T) {
	s := mustOpen(t, Options{})
	sg := testSigner(t)
	mustAccept(t, s, Command{Device: "p", ID: "x", Token: mustToken(t, sg, "plant", 7, 70, "A")})
	if _, err := s.Raise(ctxT(t), mustToken(t, sg, "yard", 7, 71, "B")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "copy.db")
	var buf bytes.Buffer
	var size int64
	n, err := s.Backup(&buf, func(n int64) { size = n })
	if err != nil || n != int64(buf.Len()) || n == 0 || size != n {
		t.Fatalf("backup: %d bytes (buffer %d, announced %d), %v", n, buf.Len(), size, err)
	}
	writeFile(t, out, buf.Bytes())
	sum, err := Inspect(out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Domains["plant"].Token.Seq != 70 || sum.Domains["yard"].Token.Holder != "B" || sum.Devices != 1 {
		t.Fatalf("summary of the copy: %+v", sum)
	}
	c := mustOpenPath(t, out, Options{})
	if f, _ := c.DomainFence("yard"); f.Seq != 71 {
		t.Fatalf("restored fence of yard: %+v", f)
	}
}

func TestInspectRefusesOtherFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "junk.db")
	writeFile(t, p, bytes.Repeat([]byte("x"), 8192))
	if _, err := Inspect(p); err == nil {
		t.Fatal("inspect of a junk file succeeded")
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
