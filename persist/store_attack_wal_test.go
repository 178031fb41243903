package persist

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// walCrashCopy copies the store file and its log as they are on disk now
// (what a power cut or SIGKILL leaves: the open transaction is not in the
// file) into dir.
func walCrashCopy(t *testing.T, path, dir string) string {
	t.Helper()
	dst := filepath.Join(dir, "fence.db")
	for _, p := range [][2]string{{path, dst}, {LogPath(path), LogPath(dst)}} {
		b, err := os.ReadFile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestAttackWALRestoredBackupStaleApply: the documented restore ("stop the
// agent, put the copy in place of fence.db, start it") leaves the live
// fence.db.wal beside the copy. The restored store's first open replays
// nothing (the live log has moved past the backup's generation) and starts
// the generation after the backup's — one the live agent already used, whose
// records are still in the log. The restored agent raises the fence to
// seq 50 (durable, acknowledged), crashes; the reopen replays its own
// record and then the live timeline's next record (same length, same
// generation, next sequence), which puts the fence back to seq 40. A
// command under seq 45 — older than the acknowledged fence — is accepted.
// I2 and I4.
func TestAttackWALRestoredBackupStaleApply(t *testing.T) {
	sg := testSigner(t)
	at := time.UnixMilli(1_700_000_000_000)
	opts := Options{Now: func() time.Time { return at }}
	livePath := filepath.Join(t.TempDir(), "fence.db")
	live, err := Open(livePath, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	raise := func(s *Store, seq uint64) {
		t.Helper()
		d, err := s.Raise(ctxT(t), mustToken(t, sg, "dom", 7, seq, "h"))
		if err != nil || !d.Raised {
			t.Fatalf("raise seq %d: %+v %v", seq, d, err)
		}
	}
	raise(live, 10)
	var backup bytes.Buffer
	if _, err := live.Backup(&backup, nil); err != nil {
		t.Fatal(err)
	}
	raise(live, 20)
	if _, err := live.Backup(new(bytes.Buffer), nil); err != nil { // a later backup: a checkpoint
		t.Fatal(err)
	}
	raise(live, 30)
	raise(live, 40)
	crashed := walCrashCopy(t, livePath, t.TempDir()) // the live agent's host loses power

	// Restore the first backup in place of fence.db.
	restoredPath := filepath.Join(filepath.Dir(crashed), "fence.db")
	if err := os.WriteFile(restoredPath, backup.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(restoredPath, opts)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := r.DomainFence("dom"); err != nil || tok.Seq != 10 {
		t.Fatalf("restored fence: %v %v, want the backup's seq 10", tok.Seq, err)
	}
	raise(r, 50) // acknowledged: the fence is seq 50, durably
	again := walCrashCopy(t, restoredPath, t.TempDir())
	r.Close()

	s := mustOpenPath(t, again, opts)
	tok, err := s.DomainFence("dom")
	if err != nil {
		t.Fatal(err)
	}
	d := mustAccept(t, s, Command{Device: "dev", ID: "c1", Token: mustToken(t, sg, "dom", 7, 45, "h"), Op: "set"})
	if tok.Seq != 50 || d.Outcome != Stale {
		t.Fatalf("after the restored agent's crash: fence seq %d (acknowledged 50), command under seq 45: %v — a stale command reaches the device", tok.Seq, d.Outcome)
	}
}

// TestAttackWALAcceptOnlyInLogMarkedInDoubt (holds): a command whose accept
// is durable only in the log (the agent is killed before any checkpoint)
// is replayed and marked in_doubt at the next open, and its retry is a
// duplicate, not a second apply; a completed one stays done.
func TestAttackWALAcceptOnlyInLogMarkedInDoubt(t *testing.T) {
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	s := mustOpenPath(t, path, Options{})
	tok := mustToken(t, sg, "dom", 1, 1, "h")
	c1 := Command{Device: "dev", ID: "c1", Token: tok, Op: "set"}
	c2 := Command{Device: "dev", ID: "c2", Token: tok, Op: "set"}
	mustAccept(t, s, c1)
	mustAccept(t, s, c2)
	if err := s.Complete(ctxT(t), "dev", "c2", []byte(`"ok"`)); err != nil {
		t.Fatal(err)
	}
	cp := walCrashCopy(t, path, t.TempDir())
	r := mustOpenPath(t, cp, Options{})
	if got := r.InDoubtAtOpen(); len(got) != 1 || got[0] != (DeviceCommand{Device: "dev", ID: "c1"}) {
		t.Fatalf("in doubt at open: %v, want dev/c1", got)
	}
	if d := mustAccept(t, r, c1); d.Outcome != Duplicate || d.Record.State != StateInDoubt {
		t.Fatalf("retry of the in-doubt command: %v %s, want a duplicate in_doubt", d.Outcome, d.Record.State)
	}
	if rec, ok, err := r.Lookup("dev", "c2"); err != nil || !ok || rec.State != StateDone || string(rec.Result) != `"ok"` {
		t.Fatalf("completed command after the crash: %+v %v %v", rec, ok, err)
	}
}
