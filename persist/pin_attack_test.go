package persist

import (
	"path/filepath"
	"testing"
	"time"
)

// TestPinAttackOpenPrunesInDoubtByAge breaks the contract behind the
// agent's validateJournal ("a restart never prunes the commands it finds
// in doubt") and with it I4 (a retried command is not applied twice),
// through journal.max_age at its smallest allowed value (1 minute).
//
// The count bound (max_records >= limits.queue + 2) does keep the in-doubt
// commands among the newest records of their device, but being newest says
// nothing about age: pruning stops at pending records while the agent runs,
// and Open's recover marks them in_doubt (no longer pending) *before* it
// prunes. A command that stayed accepted for longer than max_age — c0 in
// the driver for 90 s (an op with a long devices[].timeout), or waiting in
// a backlogged queue — while a newer command was accepted (c1 here, same
// device; any device's newer record does the same, the store clock is
// global) is older than the cutoff at Open: markInDoubt lists it, then
// pruneDevice deletes it in the same transaction. InDoubtAtOpen names a
// command the journal no longer holds, and the retry of c0, which may have
// reached the device before the crash, is Accepted as a new command — to
// be applied again — instead of Duplicate (in_doubt, not re-applied).
//
// Suggested fix: persist/store.go recover — prune before markInDoubt (the
// pending records stop pruneDevice), or have pruneDevice stop at the
// records markInDoubt just marked (s.inDoubt), as at pending ones.
func TestPinAttackOpenPrunesInDoubtByAge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.db")
	var uptime time.Duration
	opts := Options{MaxRecords: 3, MaxAge: time.Minute, Uptime: func() time.Duration { return uptime }} // the agent's floor: queue 1 + 2, 1m
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok := mustToken(t, testSigner(t), "plant", 1, 5, "A")
	c0 := Command{Device: "p", ID: "c0", Token: tok, Op: "pulse", Args: []byte(`{"ms":90000}`)}
	mustAccept(t, s, c0) // enters the driver; takes 90 s
	uptime = 70 * time.Second
	mustAccept(t, s, Command{Device: "p", ID: "c1", Token: tok, Op: "set", Args: []byte(`{"value":1}`)}) // queued behind c0
	// The agent dies (SIGKILL) with c0 in the driver and c1 queued: both
	// stay pending in the file, as Close leaves them.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	uptime = 0
	s2 := mustOpenPath(t, path, opts)
	found := map[string]bool{}
	for _, c := range s2.InDoubtAtOpen() {
		found[c.ID] = true
	}
	if !found["c0"] || !found["c1"] {
		t.Fatalf("InDoubtAtOpen %+v, want c0 and c1", s2.InDoubtAtOpen())
	}
	if r, ok, err := s2.Lookup("p", "c0"); err != nil || !ok || r.State != StateInDoubt {
		t.Errorf("c0, found in doubt at Open, is %+v (journaled %v, err %v): Open pruned it by age right after marking it in doubt", r, ok, err)
	}
	if d := mustAccept(t, s2, c0); d.Outcome != Duplicate {
		t.Fatalf("retry of c0 (in doubt at the restart, possibly applied) decided %v, want duplicate (in_doubt, not re-applied): it would be applied a second time", d.Outcome)
	}
}
