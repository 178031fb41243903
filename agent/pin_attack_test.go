package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/protocol"
)

// TestPinAttackRestartPrunesInDoubtByAgeAndReapplies breaks I4 (a retried
// command is answered in_doubt after a crash, not re-applied) and the
// contract of validateJournal ("so a restart never prunes the commands it
// finds in doubt"), at the smallest journal the agent accepts: limits.queue
// 1, journal.max_records 3 (= queue + 2), journal.max_age 1m.
//
// The crash image is what a SIGKILLed agent leaves (seeded through
// persist.Open with a test store clock, since max_age cannot be under a
// minute): c0 was accepted and went into the driver of pump1, whose
// devices[].timeout is 2 minutes (an unresponsive serial controller, a
// long move); 70 s later c1 was accepted behind it; the agent was killed
// with c0 still in the driver — it may have reached the device. Both are
// pending, both among the 3 newest records, so the count bound holds. But
// c0 is 70 s older than the newest record, and Open marks it in_doubt
// (no longer pending) before it prunes: pruneDevice deletes it as past
// max_age in the same transaction. The supervisor's retry of c0 then finds
// no journal record, is accepted as a new command and is applied again —
// the double apply the in_doubt state exists to prevent.
//
// Suggested fix: persist/store.go recover — prune before markInDoubt, so
// pending records stop pruneDevice, or exempt the commands markInDoubt
// marked (s.inDoubt) in pruneDevice; agent/config.go validateJournal's
// claim then holds for the age bound too.
func TestPinAttackRestartPrunesInDoubtByAgeAndReapplies(t *testing.T) {
	h := newHarness(t, "pump1")
	h.cfg.Limits.Queue, h.cfg.Journal.MaxRecords, h.cfg.Journal.MaxAge = 1, 3, MinJournalAge
	h.cfg.Devices[0].Timeout = 2 * time.Minute
	if err := h.cfg.WithDefaults().Validate(); err != nil {
		t.Fatalf("the smallest journal the agent allows is refused: %v", err)
	}

	// The crash image.
	if err := os.MkdirAll(h.cfg.Agent.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	var uptime time.Duration
	s, err := persist.Open(filepath.Join(h.cfg.Agent.DataDir, "fence.db"),
		persist.Options{MaxRecords: 3, MaxAge: MinJournalAge, Uptime: func() time.Duration { return uptime }})
	if err != nil {
		t.Fatal(err)
	}
	raw := h.token(5, "A")
	tok, err := fence.ParseUnverified(raw)
	if err != nil {
		t.Fatal(err)
	}
	c0, c1 := set("c0", raw, 1), set("c1", raw, 2)
	for _, c := range []struct {
		cmd protocol.Command
		at  time.Duration
	}{{c0, 0}, {c1, 70 * time.Second}} {
		uptime = c.at
		if _, err := s.Accept(context.Background(), persist.Command{Device: "pump1", ID: c.cmd.ID, Token: tok, Op: c.cmd.Op, Args: c.cmd.Args}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil { // no result for either: the pending records a SIGKILL leaves
		t.Fatal(err)
	}

	h.start()
	var listed bool
	for _, c := range h.agent.env.store.InDoubtAtOpen() {
		listed = listed || c.ID == "c0"
	}
	if !listed {
		t.Fatalf("c0 not found in doubt at the restart: %+v", h.agent.env.store.InDoubtAtOpen())
	}
	_, journaled, _ := h.agent.env.store.Lookup("pump1", "c0")

	h.sup.Publish(t, "pump1", c0) // the supervisor's retry after the restart
	r := h.sup.Wait(t, "c0")
	entries, err := sim.ReadLog(filepath.Join(h.dir, "pump1.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Log(err)
	}
	if r.Status != protocol.StatusInDoubt || !r.Duplicate {
		t.Fatalf("retry of c0, in doubt at the restart (journaled after Open: %v), answered %s/%s %q (duplicate %v), device log %d entries; "+
			"want in_doubt, not re-applied: Open pruned c0 by age right after marking it in doubt", journaled, r.Status, r.Code, r.Message, r.Duplicate, len(entries))
	}
	for _, e := range entries {
		if e.ID == "c0" {
			t.Fatalf("c0, in doubt at the restart, was applied again by the retry: %+v", e)
		}
	}
}
