package persist

import (
	"testing"
	"time"
)

// TestAwaitedRetryPinsTheRecord: a retry decided Duplicate while its
// command is still accepted pins the record, so pruning keeps it — with its
// result — through the commit that completes it, until Unpin; then it goes
// like any other record past retention. A retry of a done command pins
// nothing.
func TestAwaitedRetryPinsTheRecord(t *testing.T) {
	s := mustOpen(t, Options{MaxRecords: 1})
	tok := mustToken(t, testSigner(t), "plant", 1, 1, "A")
	mustAccept(t, s, Command{Device: "p", ID: "c0", Token: tok})
	if d := mustAccept(t, s, Command{Device: "p", ID: "c0", Token: tok}); d.Outcome != Duplicate || d.Record.State != StateAccepted {
		t.Fatalf("retry in flight: %+v", d)
	}
	mustAccept(t, s, Command{Device: "p", ID: "c1", Token: tok})
	for _, id := range []string{"c0", "c1"} {
		if err := s.Complete(ctxT(t), "p", id, []byte(`{"id":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	r, ok, err := s.Lookup("p", "c0")
	if err != nil || !ok || r.State != StateDone || string(r.Result) != `{"id":"c0"}` {
		t.Fatalf("pinned c0 after its completion and one more over a retention of 1: %+v, %v, %v", r, ok, err)
	}
	s.Unpin("p", "c0")
	if err := s.Prune(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Lookup("p", "c0"); ok {
		t.Fatal("c0 still journaled after Unpin and a prune over a retention of 1")
	}
	if d := mustAccept(t, s, Command{Device: "p", ID: "c1", Token: tok}); d.Outcome != Duplicate || d.Record.State != StateDone {
		t.Fatalf("retry of a done command: %+v", d)
	}
	if s.pins.pinned("p", "c1") {
		t.Fatal("a retry of a done command pinned its record")
	}
}

// TestAwaitedRetryPinsTheRecordAgainstAge: the same through MaxAge. c0's
// record is past retention when its result is written (the command took
// longer than the window), but a retry decided while it was in flight
// keeps it until Unpin.
func TestAwaitedRetryPinsTheRecordAgainstAge(t *testing.T) {
	var uptime time.Duration
	s := mustOpen(t, Options{MaxAge: time.Minute, Uptime: func() time.Duration { return uptime }})
	tok := mustToken(t, testSigner(t), "plant", 1, 1, "A")
	mustAccept(t, s, Command{Device: "p", ID: "c0", Token: tok})
	mustAccept(t, s, Command{Device: "p", ID: "c0", Token: tok}) // the retry, awaited
	uptime += 2 * time.Minute
	if err := s.Complete(ctxT(t), "p", "c0", []byte(`{"id":"c0"}`)); err != nil {
		t.Fatal(err)
	}
	if r, ok, err := s.Lookup("p", "c0"); err != nil || !ok || string(r.Result) != `{"id":"c0"}` {
		t.Fatalf("pinned c0, past retention at its completion: %+v, %v, %v", r, ok, err)
	}
	s.Unpin("p", "c0")
	if err := s.Prune(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Lookup("p", "c0"); ok {
		t.Fatal("c0 still journaled after Unpin and a prune, past retention")
	}
}
