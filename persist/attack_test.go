package persist

import (
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/fence"
)

// legacyRecord is one journal record as the schema before per-domain
// fences wrote it: no digest, no idempotent flag, and the order entry
// stamped with the wall clock's accepted-at.
type legacyRecord struct {
	device, id string
	tok        fence.Token
	acceptedAt time.Time
	result     string
}

// writeLegacyFile writes a store file in the previous layout (meta,
// fences, journal, order, pending; no domains bucket), schema "1": each
// device's fence is the highest token of its records.
func writeLegacyFile(t *testing.T, path string, recs []legacyRecord) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := map[string]*bolt.Bucket{}
		for _, name := range []string{"meta", "fences", "journal", "order", "pending"} {
			if b[name], err = tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		if err := b["meta"].Put([]byte("schema"), []byte("1")); err != nil {
			return err
		}
		orders := map[string]uint64{}
		for _, r := range recs {
			orders[r.device]++
			if err := putLegacy(b, r, orders[r.device]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func putLegacy(b map[string]*bolt.Bucket, r legacyRecord, n uint64) error {
	key := append([]byte(r.device+"\x00"), r.id...)
	v, _ := json.Marshal(map[string]any{"state": "done", "token": r.tok.Fence(), "accepted_at": r.acceptedAt.UnixMilli(),
		"done_at": r.acceptedAt.UnixMilli(), "result": []byte(r.result), "order": n})
	if err := b["journal"].Put(key, v); err != nil {
		return err
	}
	ok := binary.BigEndian.AppendUint64([]byte(r.device+"\x00"), n)
	ov := append(binary.BigEndian.AppendUint64(nil, uint64(r.acceptedAt.UnixMilli())), r.id...)
	if err := b["order"].Put(ok, ov); err != nil {
		return err
	}
	f, _ := json.Marshal(map[string]any{"token": r.tok.Raw, "raised_at": r.acceptedAt.UnixMilli()})
	return b["fences"].Put([]byte(r.device), f)
}

// TestAttackLegacyFutureStampShrinksDedupeWindow breaks I4 (a retried
// command is not applied twice) through the new store clock.
//
// Under the previous schema the order index held wall-clock accept times.
// pump2's last command was journaled while the gateway's clock was stepped
// a month ahead; pump1's command was journaled an hour ago. Opened by this
// build, newStoreClock takes the newest stamp of any device — pump2's
// future one — as "now" of the store clock, so pump1's hour-old record is
// a month old by that clock and pruned at Open. A retry of it is then a
// new command (Accepted, to be applied again), although neither the old
// build (24 h by wall clock) nor the new one (24 h of store time) would
// have let it go.
func TestAttackLegacyFutureStampShrinksDedupeWindow(t *testing.T) {
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	now := time.Now()
	a := mustToken(t, sg, "plant", 1, 41, "A")
	writeLegacyFile(t, path, []legacyRecord{
		{device: "pump1", id: "c1", tok: a, acceptedAt: now.Add(-time.Hour), result: "applied"},
		{device: "pump2", id: "g1", tok: a, acceptedAt: now.Add(30 * 24 * time.Hour), result: "applied"},
	})
	s := mustOpenPath(t, path, Options{MaxAge: 24 * time.Hour})
	if _, ok, err := s.Lookup("pump1", "c1"); err != nil || !ok {
		t.Errorf("pump1's hour-old record is gone after the upgrade (err %v): the dedupe window shrank", err)
	}
	if d := mustAccept(t, s, Command{Device: "pump1", ID: "c1", Token: a, Op: "set"}); d.Outcome != Duplicate {
		t.Fatalf("retry of pump1's c1 after the upgrade: %v, want duplicate (it would be applied again)", d.Outcome)
	}
}

// TestAttackLegacyRecordReusedIDReturnsOthersResult breaks the dedupe
// contract behind I4/I6 (a reused id never returns someone else's result;
// DESIGN §6: ids are bound to a digest of token position, op and args)
// for records of the previous schema.
//
// A legacy record has no digest, and journaled answers Duplicate whenever
// the digest is empty, without comparing what the record does hold — the
// token's position. B, holding the newer lease 42, sends a different
// command under A's old id x: it is not applied, B is told its command
// was applied (A's result, duplicate), and the fence is not raised by
// B's valid newer token.
func TestAttackLegacyRecordReusedIDReturnsOthersResult(t *testing.T) {
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	a := mustToken(t, sg, "plant", 1, 41, "A")
	writeLegacyFile(t, path, []legacyRecord{
		{device: "pump1", id: "x", tok: a, acceptedAt: time.Now().Add(-time.Minute), result: "A's result"},
	})
	s := mustOpenPath(t, path, Options{})
	b := mustToken(t, sg, "plant", 1, 42, "B")
	d := mustAccept(t, s, Command{Device: "pump1", ID: "x", Token: b, Op: "set", Args: []byte(`{"value":2}`)})
	if d.Outcome != IDReused {
		t.Fatalf("B's different command under A's legacy id: %v with result %q, want id_reused", d.Outcome, d.Record.Result)
	}
}

// holds: a current-schema store reopened with the wall clock stepped far
// ahead or back keeps every record and answers a retry Duplicate — the
// store clock carries over from the newest stamp, not from the wall clock.
func TestAttackClockStepAcrossRestartKeepsWindow(t *testing.T) {
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	a := mustToken(t, sg, "plant", 1, 41, "A")
	s := mustOpenPath(t, path, Options{MaxAge: time.Hour})
	mustAccept(t, s, Command{Device: "pump1", ID: "c1", Token: a, Op: "set"})
	if err := s.Complete(ctxT(t), "pump1", "c1", []byte("r")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, wall := range []time.Time{time.Now().Add(10 * 365 * 24 * time.Hour), time.UnixMilli(1000)} {
		s = mustOpenPath(t, path, Options{MaxAge: time.Hour, Now: func() time.Time { return wall }})
		if d := mustAccept(t, s, Command{Device: "pump1", ID: "c1", Token: a, Op: "set"}); d.Outcome != Duplicate {
			t.Fatalf("retry after a restart with the wall clock at %v: %v, want duplicate", wall, d.Outcome)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
