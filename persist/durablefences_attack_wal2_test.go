package persist

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// wal2Seq returns the seq of domain's durable fence in s, failing on error.
func wal2Seq(t *testing.T, s *Store, domain string) uint64 {
	t.Helper()
	tok, err := s.DomainFence(domain)
	if err != nil {
		t.Fatalf("DomainFence(%s): %v", domain, err)
	}
	return tok.Seq
}

// TestAttackWAL2AcceptReturnedRaiseSeenByDomainFence (holds): many
// concurrent Accepts and Raises of one domain (different devices, so they
// group into batches); every caller whose Accept/Raise returned a raise
// reads, right after, a DomainFence at least as new as its own token, and
// DomainFence never goes down.
func TestAttackWAL2AcceptReturnedRaiseSeenByDomainFence(t *testing.T) {
	sg := testSigner(t)
	s := mustOpen(t, Options{})
	const n = 200
	toks := make([]fence.Token, n+1)
	for i := 1; i <= n; i++ {
		toks[i] = mustToken(t, sg, "dom", 1, uint64(i), "h")
	}
	var wg sync.WaitGroup
	var bad atomic.Value
	stop := make(chan struct{})
	var readerWG sync.WaitGroup
	readerWG.Add(1)
	go func() { // a reader: the cache never goes down
		defer readerWG.Done()
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			tok, err := s.DomainFence("dom")
			if err != nil {
				bad.Store(fmt.Sprintf("reader: %v", err))
				return
			}
			if tok.Seq < last {
				bad.Store(fmt.Sprintf("DomainFence went down from %d to %d", last, tok.Seq))
				return
			}
			last = tok.Seq
		}
	}()
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var err error
			var d Decision
			if i%3 == 0 {
				d, err = s.Raise(ctxT(t), toks[i])
			} else {
				d, err = s.Accept(ctxT(t), Command{Device: fmt.Sprint("dev", i%17), ID: fmt.Sprint("c", i), Token: toks[i], Op: "set"})
			}
			if err != nil {
				bad.Store(err.Error())
				return
			}
			if d.Outcome != Accepted {
				return // stale: a newer one got there first
			}
			got, err := s.DomainFence("dom")
			if err != nil {
				bad.Store(err.Error())
				return
			}
			if cmp, _ := got.Compare(toks[i]); cmp < 0 {
				bad.Store(fmt.Sprintf("seq %d accepted (returned), DomainFence then says seq %d", i, got.Seq))
			}
		}(i)
	}
	wg.Wait()
	close(stop)
	readerWG.Wait()
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
	// The cache equals what the transaction holds.
	all, err := s.DomainFences()
	if err != nil {
		t.Fatal(err)
	}
	if got := wal2Seq(t, s, "dom"); got != all["dom"].Token.Seq {
		t.Fatalf("DomainFence seq %d, DomainFences seq %d", got, all["dom"].Token.Seq)
	}
}

// TestAttackWAL2DomainFenceAfterFailedBatch (holds): a batch raising the
// fence fails before its record is durable; DomainFence then refuses (the
// store failed) rather than answering with the raise or without it, a
// backup refuses too, and after a reopen the fence is the last durable one.
func TestAttackWAL2DomainFenceAfterFailedBatch(t *testing.T) {
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	var fail atomic.Bool
	s := mustOpenPath(t, path, Options{beforeCommit: func() error {
		if fail.Load() {
			return errors.New("injected disk failure")
		}
		return nil
	}})
	if _, err := s.Raise(ctxT(t), mustToken(t, sg, "dom", 1, 10, "h")); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if _, err := s.Accept(ctxT(t), Command{Device: "dev", ID: "c1", Token: mustToken(t, sg, "dom", 1, 20, "h"), Op: "set"}); err == nil {
		t.Fatal("accept through a failing disk succeeded")
	}
	if tok, err := s.DomainFence("dom"); err == nil {
		t.Fatalf("DomainFence after a failed batch: seq %d, no error", tok.Seq)
	}
	if _, err := s.Backup(new(bytes.Buffer), nil); err == nil {
		t.Fatal("Backup after a failed batch succeeded")
	}
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if tok, err := s.DomainFence("dom"); !errors.Is(err, ErrClosed) {
		t.Fatalf("DomainFence after Close: %v %v, want ErrClosed", tok.Seq, err)
	}
	r := mustOpenPath(t, path, Options{})
	if got := wal2Seq(t, r, "dom"); got != 10 {
		t.Fatalf("fence after reopen: seq %d, want 10 (20 was never durable)", got)
	}
	if _, ok, err := r.Lookup("dev", "c1"); err != nil || ok {
		t.Fatalf("failed accept journaled after reopen: %v %v", ok, err)
	}
}

// TestAttackWAL2DomainFenceAfterClose (holds): DomainFence on a closed
// store answers ErrClosed, never a (possibly stale) cached fence.
func TestAttackWAL2DomainFenceAfterClose(t *testing.T) {
	sg := testSigner(t)
	s, err := Open(filepath.Join(t.TempDir(), "fence.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Raise(ctxT(t), mustToken(t, sg, "dom", 1, 3, "h")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if tok, err := s.DomainFence("dom"); !errors.Is(err, ErrClosed) {
		t.Fatalf("DomainFence after Close: seq %d, %v; want ErrClosed", tok.Seq, err)
	}
}

// TestAttackWAL2CacheLoadedAfterV1Migration (holds): a schema-1 file has
// device fences only; Open's migration writes the domains bucket outside
// the Committer (no OnDurable). The cache must still hold the migrated
// fence, so that the recheck refuses a command older than it.
func TestAttackWAL2CacheLoadedAfterV1Migration(t *testing.T) {
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	at := time.Now().Add(-time.Minute)
	writeLegacyFile(t, path, []legacyRecord{
		{device: "pump1", id: "a", tok: mustToken(t, sg, "plant", 3, 9, "h"), acceptedAt: at, result: "ok"},
		{device: "pump2", id: "b", tok: mustToken(t, sg, "plant", 3, 4, "h"), acceptedAt: at, result: "ok"},
	})
	s := mustOpenPath(t, path, Options{})
	tok, err := s.DomainFence("plant")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Epoch != 3 || tok.Seq != 9 {
		t.Fatalf("DomainFence after migrating schema 1: %d/%d, want 3/9 (the highest device fence)", tok.Epoch, tok.Seq)
	}
	// And after a crash right after the migrating open (log only).
	cp := walCrashCopy(t, path, t.TempDir())
	r := mustOpenPath(t, cp, Options{})
	if got := wal2Seq(t, r, "plant"); got != 9 {
		t.Fatalf("after a crash copy of the migrated store: seq %d, want 9", got)
	}
}

// TestAttackWAL2CacheAfterCrashReplay (holds): raises durable only in the
// log (the agent is killed before any checkpoint) are in the cache after
// the reopen's replay, and a command older than them is stale.
func TestAttackWAL2CacheAfterCrashReplay(t *testing.T) {
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	s := mustOpenPath(t, path, Options{})
	mustAccept(t, s, Command{Device: "a", ID: "c1", Token: mustToken(t, sg, "dom", 1, 5, "h"), Op: "set"})
	if _, err := s.Raise(ctxT(t), mustToken(t, sg, "dom", 1, 30, "h")); err != nil {
		t.Fatal(err)
	}
	cp := walCrashCopy(t, path, t.TempDir())
	r := mustOpenPath(t, cp, Options{})
	if got := wal2Seq(t, r, "dom"); got != 30 {
		t.Fatalf("after the crash: DomainFence seq %d, want 30 (acknowledged, in the log)", got)
	}
	if d := mustAccept(t, r, Command{Device: "b", ID: "c2", Token: mustToken(t, sg, "dom", 1, 20, "h"), Op: "set"}); d.Outcome != Stale {
		t.Fatalf("command under seq 20 after the crash: %v, want stale", d.Outcome)
	}
}

// TestAttackWAL2CacheAcrossLogFullCheckpoints (holds): batches large enough
// that the log fills take the checkpoint path of logBatch (errLogFull);
// the cache follows those batches too, and a crash copy after them keeps
// every acknowledged raise.
func TestAttackWAL2CacheAcrossLogFullCheckpoints(t *testing.T) {
	sg := testSigner(t)
	path := filepath.Join(t.TempDir(), "fence.db")
	s := mustOpenPath(t, path, Options{MaxRecords: 1 << 30, MaxAge: 1 << 62})
	args := []byte(`"` + strings.Repeat("x", 900<<10) + `"`)
	for i := 1; i <= 14; i++ {
		d := mustAccept(t, s, Command{Device: "dev", ID: fmt.Sprint("c", i), Token: mustToken(t, sg, "dom", 1, uint64(i), "h"), Op: "set", Args: args})
		if d.Outcome != Accepted {
			t.Fatalf("c%d: %v", i, d.Outcome)
		}
		if got := wal2Seq(t, s, "dom"); got != uint64(i) {
			t.Fatalf("after accept %d (log full every ~4): DomainFence seq %d", i, got)
		}
	}
	cp := walCrashCopy(t, path, t.TempDir())
	r := mustOpenPath(t, cp, Options{MaxRecords: 1 << 30, MaxAge: 1 << 62})
	if got := wal2Seq(t, r, "dom"); got != 14 {
		t.Fatalf("after a crash: seq %d, want 14", got)
	}
}

// TestAttackWAL2RestoredBackupBesideLiveLogCrashEachStep (holds): a backup
// restored beside the live log of its own store replays exactly the live
// timeline's records after it (so the fence is the live one, not the
// backup's), and the restored store's own raises survive a crash at each
// later step — a second crash, a clean close, a second restore of the
// crash copy.
func TestAttackWAL2RestoredBackupBesideLiveLogCrashEachStep(t *testing.T) {
	sg := testSigner(t)
	livePath := filepath.Join(t.TempDir(), "fence.db")
	live, err := Open(livePath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	raise := func(s *Store, seq uint64) {
		t.Helper()
		if d, err := s.Raise(ctxT(t), mustToken(t, sg, "dom", 1, seq, "h")); err != nil || !d.Raised {
			t.Fatalf("raise %d: %+v %v", seq, d, err)
		}
	}
	raise(live, 10)
	var backup bytes.Buffer
	if _, err := live.Backup(&backup, nil); err != nil {
		t.Fatal(err)
	}
	raise(live, 20)
	raise(live, 30)
	crashed := walCrashCopy(t, livePath, t.TempDir())
	live.Close()

	if err := os.WriteFile(crashed, backup.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(crashed, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := wal2Seq(t, r, "dom"); got != 30 {
		t.Fatalf("restored beside the live log: seq %d, want 30 (the log's continuation of the backup)", got)
	}
	raise(r, 40)
	c2 := walCrashCopy(t, crashed, t.TempDir())
	r.Close()

	r2 := mustOpenPath(t, c2, Options{})
	if got := wal2Seq(t, r2, "dom"); got != 40 {
		t.Fatalf("restored store crashed after raising to 40: seq %d", got)
	}
	raise(r2, 50)
	c3 := walCrashCopy(t, c2, t.TempDir())
	// The backup restored again, now beside the restored timeline's log:
	// the log is not its continuation (another generation), nothing of it
	// may apply — in particular not half of it.
	if err := os.WriteFile(c3, backup.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	r3 := mustOpenPath(t, c3, Options{})
	got := wal2Seq(t, r3, "dom")
	if got != 10 && got != 50 {
		t.Fatalf("backup restored beside a later timeline's log: seq %d, want the backup's 10 or the log's whole 50", got)
	}
}

// TestAttackWAL2FailedCheckpointAtBackupKeepsCacheHonest (holds): on a full
// disk the log takes a large accept, the checkpoint of the online backup
// fails; DomainFence must refuse from then on, and after space is back
// the reopen has the acknowledged raise (it was durable in the log).
func TestAttackWAL2FailedCheckpointAtBackupKeepsCacheHonest(t *testing.T) {
	dir := smallDisk(t, "6m")
	sg := testSigner(t)
	path := filepath.Join(dir, "fence.db")
	opts := Options{LockTimeout: 200 * time.Millisecond, MaxRecords: 1 << 30, MaxAge: 1 << 62}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	filler := fillDisk(t, dir)
	args := []byte(`"` + strings.Repeat("y", 256<<10) + `"`)
	d, err := s.Accept(ctxT(t), Command{Device: "dev", ID: "big", Token: mustToken(t, sg, "dom", 1, 20, "h"), Op: "set", Args: args})
	if err != nil {
		t.Skipf("the log refused the accept on a full disk: %v", err)
	}
	if d.Outcome != Accepted {
		t.Fatal(d.Outcome)
	}
	if _, err := s.Backup(new(bytes.Buffer), nil); err == nil {
		t.Skip("the checkpoint found room: no failure to attack")
	}
	if tok, err := s.DomainFence("dom"); err == nil {
		t.Fatalf("DomainFence after a failed checkpoint answered seq %d without error", tok.Seq)
	}
	if _, err := s.Raise(ctxT(t), mustToken(t, sg, "dom", 1, 25, "h")); err == nil {
		t.Fatal("Raise after a failed checkpoint succeeded")
	}
	_ = s.Close()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=64m"); err != nil {
		t.Fatal(err)
	}
	r := mustOpenPath(t, path, opts)
	if got := wal2Seq(t, r, "dom"); got != 20 {
		t.Fatalf("after the failed checkpoint and a reopen: seq %d, want the acknowledged 20", got)
	}
	if rec, ok, err := r.Lookup("dev", "big"); err != nil || !ok || rec.State != StateInDoubt {
		t.Fatalf("acknowledged accept after reopen: %+v %v %v, want in_doubt", rec.State, ok, err)
	}
}
