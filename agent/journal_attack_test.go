package agent

import (
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/protocol"
)

// waitJournaled polls the agent's store until id is journaled in state st.
func waitJournaled(t *testing.T, h *harness, device, id string, st persist.State) {
	t.Helper()
	waitFor(t, id+" journaled "+string(st), func() bool {
		r, ok, err := h.agent.env.store.Lookup(device, id)
		return err == nil && ok && r.State == st
	})
}

// TestJournalAttackAwaitedRetryLosesResultToCountPruning breaks I4 (a
// retried command, same id, gets the same result back) through
// journal.max_records.
//
// c0, a slow pulse, is in the driver; c1 is accepted behind it (pipelined).
// A retry of c0 arrives while c0 is still in flight: the journal holds c0
// (accepted), so the retry is decided Duplicate — inside the dedupe window,
// not a new command — and queued to be answered after c0 (await). c0 then
// completes; the batch of its Complete prunes the device (AfterBatch): 2
// records > max_records 1, and c0, done now, is the oldest not pending, so
// c0's record — with the result just made durable and published to the
// original sender — is deleted in the same transaction. answerAwaited then
// looks c0 up, finds nothing, and tells the retry "in_doubt: no result
// recorded for the original command": a result the agent published is lost
// for a retry the journal had deduplicated. (Pruning c0 is allowed; answering
// a deduplicated retry from a lookup after that prune is not.)
//
// Fixed twice over: the retry's decision pins c0's record until it is
// answered (persist pins), and the agent now refuses a journal.max_records
// below limits.queue + 2, so the test runs at the smallest retention
// allowed (queue 1, 3 records). The same loss through journal.max_age is
// persist's TestAwaitedRetryPinsTheRecordAgainstAge: the agent refuses a
// max_age under a minute, too long for a test here.
func TestJournalAttackAwaitedRetryLosesResultToCountPruning(t *testing.T) {
	h := newHarness(t, "pump1")
	h.cfg.Journal.MaxRecords, h.cfg.Limits.Queue = 3, 1
	h.start()
	tok := h.token(5, "A")
	c0 := pulse("c0", tok, 1500)
	h.sup.Publish(t, "pump1", c0)
	waitJournaled(t, h, "pump1", "c0", persist.StateAccepted)
	h.sup.Publish(t, "pump1", set("c1", tok, 1))
	waitJournaled(t, h, "pump1", "c1", persist.StateAccepted)
	h.sup.Publish(t, "pump1", c0) // the retry, while c0 is in the driver

	first := h.sup.Wait(t, "c0")
	wantResult(t, first, protocol.StatusApplied, protocol.CodeOK)
	retry := h.sup.Wait(t, "c0")
	wantResult(t, h.sup.Wait(t, "c1"), protocol.StatusApplied, protocol.CodeOK)
	if retry.Status != protocol.StatusApplied || retry.Code != protocol.CodeOK || !retry.Duplicate {
		t.Fatalf("retry of c0, decided a duplicate while c0 was journaled, got %s/%s %q (duplicate %v); "+
			"want the original result applied/ok again", retry.Status, retry.Code, retry.Message, retry.Duplicate)
	}
	entries, err := sim.ReadLog(filepath.Join(h.dir, "pump1.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("device log %+v, want c0 and c1 once each", entries)
	}
}
