package persist

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestAcceptRules(t *testing.T) {
	sg := testSigner(t)
	t41 := mustToken(t, sg, "plant", 7, 41, "A")
	t42 := mustToken(t, sg, "plant", 7, 42, "B")
	t42forged := mustToken(t, sg, "plant", 7, 42, "C") // same position, other lease
	t43 := mustToken(t, sg, "plant", 7, 43, "A")
	yard5 := mustToken(t, sg, "yard", 1, 5, "A")

	tests := []struct {
		name       string
		cmd        Command
		want       Outcome
		wantFence  uint64
		wantRaised bool
	}{
		{"first command raises", Command{Device: "pump1", ID: "c1", Token: t42}, Accepted, 42, true},
		{"same lease accepted", Command{Device: "pump1", ID: "c2", Token: t42}, Accepted, 42, false},
		{"older token stale", Command{Device: "pump1", ID: "c3", Token: t41}, Stale, 42, false},
		{"equal position other lease", Command{Device: "pump1", ID: "c4", Token: t42forged}, Conflict, 42, false},
		{"retry of known id is duplicate", Command{Device: "pump1", ID: "c1", Token: t42}, Duplicate, 42, false},
		{"known id with another token is reused", Command{Device: "pump1", ID: "c1", Token: t41}, IDReused, 42, false},
		{"known id with another op is reused", Command{Device: "pump1", ID: "c1", Token: t42, Op: "pulse"}, IDReused, 42, false},
		{"newer token raises", Command{Device: "pump1", ID: "c5", Token: t43}, Accepted, 43, true},
		{"other device of the domain is fenced too", Command{Device: "pump2", ID: "c1", Token: t41}, Stale, 43, false},
		{"other domain independent", Command{Device: "fan1", ID: "c1", Token: yard5}, Accepted, 5, true},
	}
	s := mustOpen(t, Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := mustAccept(t, s, tc.cmd)
			if d.Outcome != tc.want || d.Fence.Seq != tc.wantFence || d.Raised != tc.wantRaised {
				t.Fatalf("got %v fence %d raised %v, want %v fence %d raised %v",
					d.Outcome, d.Fence.Seq, d.Raised, tc.want, tc.wantFence, tc.wantRaised)
			}
		})
	}
	// Rejected commands left no trace in the journal.
	for _, id := range []string{"c3", "c4"} {
		if _, ok, err := s.Lookup("pump1", id); err != nil || ok {
			t.Errorf("rejected %s journaled (ok=%v err=%v)", id, ok, err)
		}
	}
}

func TestAcceptOtherDomainIsAnsweredAndChangesNothing(t *testing.T) {
	sg := testSigner(t)
	s := mustOpen(t, Options{})
	mustAccept(t, s, Command{Device: "pump1", ID: "c1", Token: mustToken(t, sg, "plant", 1, 5, "A")})
	d := mustAccept(t, s, Command{Device: "pump1", ID: "c2", Token: mustToken(t, sg, "other", 9, 9, "B")})
	if d.Outcome != WrongDomain || d.Fence.Domain != "plant" {
		t.Fatalf("got %v fence %v, want wrong_domain with the plant fence", d.Outcome, d.Fence)
	}
	// The store is still healthy: a logical rejection is not a storage error.
	mustAccept(t, s, Command{Device: "pump1", ID: "c3", Token: mustToken(t, sg, "plant", 1, 6, "A")})
	if _, ok, _ := s.Lookup("pump1", "c2"); ok {
		t.Fatal("foreign-domain command journaled")
	}
	f, _ := s.Fences()
	if f["pump1"].Token.Seq != 6 || f["pump1"].Token.Domain != "plant" {
		t.Fatalf("fence changed: %v", f["pump1"].Token)
	}
}

func TestInvalidArgumentsChangeNothing(t *testing.T) {
	sg := testSigner(t)
	good := mustToken(t, sg, "plant", 1, 1, "A")
	unsigned := good
	unsigned.Raw = ""
	long := string(make([]byte, MaxCommandIDLen+1))
	tests := []struct {
		name string
		cmd  Command
	}{
		{"bad device id", Command{Device: "pump 1", ID: "c", Token: good}},
		{"empty device", Command{Device: "", ID: "c", Token: good}},
		{"empty command id", Command{Device: "p", ID: "", Token: good}},
		{"long command id", Command{Device: "p", ID: long, Token: good}},
		{"unsigned token", Command{Device: "p", ID: "c", Token: unsigned}},
		{"zero token", Command{Device: "p", ID: "c"}},
	}
	s := mustOpen(t, Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Accept(ctxT(t), tc.cmd); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
	if f, _ := s.Fences(); len(f) != 0 {
		t.Fatalf("fences changed: %v", f)
	}
}

func TestCompleteAndDuplicate(t *testing.T) {
	sg := testSigner(t)
	s := mustOpen(t, Options{})
	tok := mustToken(t, sg, "plant", 1, 1, "A")
	mustAccept(t, s, Command{Device: "p", ID: "c1", Token: tok})
	if err := s.Complete(ctxT(t), "p", "c1", []byte(`{"status":"applied"}`)); err != nil {
		t.Fatal(err)
	}
	d := mustAccept(t, s, Command{Device: "p", ID: "c1", Token: tok})
	if d.Outcome != Duplicate || d.Record.State != StateDone || string(d.Record.Result) != `{"status":"applied"}` {
		t.Fatalf("retry: %+v", d)
	}
	if err := s.Complete(ctxT(t), "p", "c1", []byte("again")); !errors.Is(err, ErrNotAccepted) {
		t.Fatalf("second complete: %v, want ErrNotAccepted", err)
	}
	if err := s.Complete(ctxT(t), "p", "nope", nil); !errors.Is(err, ErrNotAccepted) {
		t.Fatalf("complete unknown: %v, want ErrNotAccepted", err)
	}
	r, _, _ := s.Lookup("p", "c1")
	if string(r.Result) != `{"status":"applied"}` {
		t.Fatalf("result overwritten: %q", r.Result)
	}
}

func TestReopenDurabilityAndInDoubt(t *testing.T) {
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t9 := mustToken(t, sg, "plant", 3, 9, "A")
	mustAccept(t, s, Command{Device: "p", ID: "done", Token: t9})
	if err := s.Complete(ctxT(t), "p", "done", []byte("r")); err != nil {
		t.Fatal(err)
	}
	mustAccept(t, s, Command{Device: "p", ID: "inflight", Token: t9})
	mustAccept(t, s, Command{Device: "q", ID: "q1", Token: mustToken(t, sg, "yard", 3, 10, "B")})
	if err := s.Complete(ctxT(t), "q", "q1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Raise(ctxT(t), mustToken(t, sg, "yard", 3, 11, "B")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := mustOpenPath(t, path, Options{})
	if got := s2.InDoubtAtOpen(); len(got) != 1 || got[0] != (DeviceCommand{"p", "inflight"}) {
		t.Fatalf("in doubt at open: %v", got)
	}
	fences, err := s2.Fences()
	if err != nil {
		t.Fatal(err)
	}
	if fences["p"].Token.Seq != 9 || fences["q"].Token.Seq != 10 {
		t.Fatalf("device fences after reopen: %+v", fences)
	}
	domains, err := s2.DomainFences()
	if err != nil {
		t.Fatal(err)
	}
	if domains["plant"].Token.Seq != 9 || domains["yard"].Token.Seq != 11 || domains["yard"].Token.Holder != "B" {
		t.Fatalf("domain fences after reopen: %+v", domains)
	}
	d := mustAccept(t, s2, Command{Device: "p", ID: "inflight", Token: t9})
	if d.Outcome != Duplicate || d.Record.State != StateInDoubt {
		t.Fatalf("retry of in-flight command: %v %v", d.Outcome, d.Record.State)
	}
	d = mustAccept(t, s2, Command{Device: "p", ID: "done", Token: t9})
	if d.Outcome != Duplicate || string(d.Record.Result) != "r" {
		t.Fatalf("retry of done command: %+v", d)
	}
	if err := s2.Complete(ctxT(t), "p", "inflight", nil); !errors.Is(err, ErrNotAccepted) {
		t.Fatalf("completing an in-doubt command: %v, want ErrNotAccepted", err)
	}
}

func TestReapplyInDoubt(t *testing.T) {
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	s, _ := Open(path, Options{})
	t1 := mustToken(t, sg, "plant", 1, 1, "A")
	mustAccept(t, s, Command{Device: "p", ID: "x", Token: t1, Idempotent: true})
	mustAccept(t, s, Command{Device: "p", ID: "y", Token: t1, Idempotent: true})
	s.Close()
	s2 := mustOpenPath(t, path, Options{})
	d := mustAccept(t, s2, Command{Device: "p", ID: "y", Token: t1})
	if d.Outcome != Accepted || d.Record.State != StateAccepted {
		t.Fatalf("reapply: %v %v", d.Outcome, d.Record.State)
	}
	mustAccept(t, s2, Command{Device: "p", ID: "z", Token: mustToken(t, sg, "plant", 1, 2, "B")})
	d = mustAccept(t, s2, Command{Device: "p", ID: "x", Token: t1})
	if d.Outcome != Stale {
		t.Fatalf("reapply with a superseded token: %v, want stale", d.Outcome)
	}
	if r, _, _ := s2.Lookup("p", "x"); r.State != StateInDoubt {
		t.Fatalf("stale reapply changed record: %v", r.State)
	}
	if j, _ := s2.Journal("p"); len(j) != 3 {
		t.Fatalf("journal has %d records, want 3 (reapply keeps its place)", len(j))
	}
}

func TestSecondOpenFailsFastWithErrLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.db")
	mustOpenPath(t, path, Options{})
	start := time.Now()
	_, err := Open(path, Options{LockTimeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	t.Logf("second open failed after %v", time.Since(start))
}

func TestFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.db")
	mustOpenPath(t, path, Options{})
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestCommitFailureIsFailStop(t *testing.T) {
	sg := testSigner(t)
	var failing atomic.Bool
	disk := errors.New("disk on fire")
	s := mustOpen(t, Options{beforeCommit: func() error {
		if failing.Load() {
			return disk
		}
		return nil
	}})
	tok := mustToken(t, sg, "plant", 1, 1, "A")
	mustAccept(t, s, Command{Device: "p", ID: "ok", Token: tok})
	failing.Store(true)
	_, err := s.Accept(ctxT(t), Command{Device: "p", ID: "lost", Token: mustToken(t, sg, "plant", 1, 2, "A")})
	if !errors.Is(err, ErrFailed) || !errors.Is(err, disk) {
		t.Fatalf("accept during failing commit: %v", err)
	}
	failing.Store(false) // the disk recovers; the store must not
	if _, err := s.Accept(ctxT(t), Command{Device: "p", ID: "later", Token: tok}); !errors.Is(err, ErrFailed) {
		t.Fatalf("accept after failure: %v, want ErrFailed", err)
	}
	if _, err := s.Fences(); !errors.Is(err, ErrFailed) {
		t.Fatalf("read after failure: %v, want ErrFailed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpenPath(t, s.Path(), Options{})
	if _, ok, _ := s2.Lookup("p", "lost"); ok {
		t.Fatal("the failed batch's command is in the journal")
	}
	f, _ := s2.Fences()
	if f["p"].Token.Seq != 1 {
		t.Fatalf("fence after failed raise: %d, want 1", f["p"].Token.Seq)
	}
}

func TestClosedStore(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "f.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	if _, err := s.Accept(ctxT(t), Command{Device: "p", ID: "c", Token: mustToken(t, testSigner(t), "d", 1, 1, "h")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("accept after close: %v", err)
	}
}

func TestOptionsValidateNamesField(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "f.db"), Options{MaxRecords: -1})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "MaxRecords -1") {
		t.Fatalf("err = %v", err)
	}
}
