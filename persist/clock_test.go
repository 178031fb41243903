package persist

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestItem5ClockStepKeepsDedupeWindow: a gateway without RTC boots in 1970,
// journals commands, and NTP then steps the wall clock to today (and, for
// good measure, back again). Retention must not treat the records as old:
// a retry is still a duplicate. Only time the store was open ages them.
func TestItem5ClockStepKeepsDedupeWindow(t *testing.T) {
	wall := time.UnixMilli(5_000) // 1970
	var uptime time.Duration
	opts := Options{MaxAge: 24 * time.Hour, Now: func() time.Time { return wall },
		Uptime: func() time.Duration { return uptime }}
	path := filepath.Join(t.TempDir(), "fence.db")
	s := mustOpenPath(t, path, opts)
	tok := mustToken(t, testSigner(t), "plant", 1, 1, "A")
	for i := range 3 {
		id := fmt.Sprintf("c%d", i)
		mustAccept(t, s, Command{Device: "p", ID: id, Token: tok, Op: "set"})
		if err := s.Complete(ctxT(t), "p", id, []byte("r")); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []time.Time{time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.UnixMilli(-1e12)} {
		wall = step
		uptime += time.Minute
		if err := s.Prune(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if j, _ := s.Journal("p"); len(j) != 3 {
			t.Fatalf("after a wall-clock step to %v the journal has %v, want all 3", step, ids(j))
		}
		if d := mustAccept(t, s, Command{Device: "p", ID: "c0", Token: tok, Op: "set"}); d.Outcome != Duplicate {
			t.Fatalf("retry after a clock step to %v: %v, want duplicate", step, d.Outcome)
		}
	}
	// Reopened (a reboot), the store clock goes on from the newest stamp.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	uptime = 0
	s = mustOpenPath(t, path, opts)
	if j, _ := s.Journal("p"); len(j) != 3 {
		t.Fatalf("after reopen the journal has %v, want all 3", ids(j))
	}
	uptime = 25 * time.Hour // a day of running really passed: now they age out
	if err := s.Prune(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if j, _ := s.Journal("p"); len(j) != 0 {
		t.Fatalf("records older than MaxAge of store time kept: %v", ids(j))
	}
}

// TestItem6IDReuseChangesNothing: an id journaled for one command, sent
// again with another token, op or args, is IDReused and changes nothing;
// in-doubt re-application follows the journaled op, never the retry's.
func TestItem6IDReuseChangesNothing(t *testing.T) {
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	s := mustOpenPath(t, path, Options{})
	a := mustToken(t, sg, "plant", 1, 1, "A")
	mustAccept(t, s, Command{Device: "p", ID: "x", Token: a, Op: "set", Args: []byte(`{"value": 1}`)})
	if err := s.Complete(ctxT(t), "p", "x", []byte("A's result")); err != nil {
		t.Fatal(err)
	}
	b := mustToken(t, sg, "plant", 1, 2, "B")
	for _, cmd := range []Command{
		{Device: "p", ID: "x", Token: b, Op: "set", Args: []byte(`{"value":1}`)},
		{Device: "p", ID: "x", Token: a, Op: "set", Args: []byte(`{"value":2}`)},
		{Device: "p", ID: "x", Token: a, Op: "pulse", Args: []byte(`{"value":1}`)},
	} {
		d := mustAccept(t, s, cmd)
		if d.Outcome != IDReused {
			t.Fatalf("reuse %+v: %v, want id_reused", cmd, d.Outcome)
		}
	}
	if f, _ := s.DomainFence("plant"); f.Seq != 1 {
		t.Fatalf("a reused id raised the fence to %d", f.Seq)
	}
	if d := mustAccept(t, s, Command{Device: "p", ID: "x", Token: a, Op: "set", Args: []byte(`{ "value" : 1 }`)}); d.Outcome != Duplicate || string(d.Record.Result) != "A's result" {
		t.Fatalf("the same command re-encoded: %v, want duplicate with the result", d.Outcome)
	}

	// A non-idempotent command left in doubt is not re-applied by a retry
	// that claims idempotency.
	mustAccept(t, s, Command{Device: "p", ID: "y", Token: a, Op: "pulse"})
	s.Close()
	s = mustOpenPath(t, path, Options{})
	if d := mustAccept(t, s, Command{Device: "p", ID: "y", Token: a, Op: "pulse", Idempotent: true}); d.Outcome != Duplicate || d.Record.State != StateInDoubt {
		t.Fatalf("retry of an in-doubt non-idempotent command: %v %v, want duplicate in_doubt", d.Outcome, d.Record.State)
	}
}

// TestItem3FenceIsPerDomain: a token accepted on one device of a domain, or
// raised by a grant, fences every device of the domain.
func TestItem3FenceIsPerDomain(t *testing.T) {
	sg := testSigner(t)
	s := mustOpen(t, Options{})
	mustAccept(t, s, Command{Device: "pump1", ID: "b1", Token: mustToken(t, sg, "plant", 1, 42, "B")})
	if d := mustAccept(t, s, Command{Device: "pump2", ID: "a1", Token: mustToken(t, sg, "plant", 1, 41, "A")}); d.Outcome != Stale || d.Fence.Seq != 42 {
		t.Fatalf("older token on another device of the domain: %v fence %d, want stale at 42", d.Outcome, d.Fence.Seq)
	}
	if _, err := s.Raise(ctxT(t), mustToken(t, sg, "plant", 1, 50, "C")); err != nil {
		t.Fatal(err)
	}
	if d := mustAccept(t, s, Command{Device: "pump3", ID: "b2", Token: mustToken(t, sg, "plant", 1, 42, "B")}); d.Outcome != Stale || d.Fence.Seq != 50 {
		t.Fatalf("token below a grant on a device never commanded: %v fence %d, want stale at 50", d.Outcome, d.Fence.Seq)
	}
}
