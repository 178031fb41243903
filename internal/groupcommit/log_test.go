package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

var testBucket = []byte("b")

// loggedStore is a logged Committer over a bbolt file in a test directory.
type loggedStore struct {
	path string
	db   *bolt.DB
	c    *Committer
}

func openLogged(t *testing.T, path string, size int64, opts CommitterOptions) *loggedStore {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := OpenLog(db, path+".wal", size)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(testBucket); return err }); err != nil {
		t.Fatal(err)
	}
	opts.Log = l
	c, err := NewCommitter(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := &loggedStore{path: path, db: db, c: c}
	t.Cleanup(func() { s.close() })
	return s
}

func (s *loggedStore) close() {
	if s.c != nil {
		s.c.Close()
		s.db.Close()
		s.c = nil
	}
}

func (s *loggedStore) put(t *testing.T, key, value string) {
	t.Helper()
	if err := s.tryPut(key, value); err != nil {
		t.Fatal(err)
	}
}

// tryPut submits key = value and returns Submit's error (for goroutines
// other than the test's).
func (s *loggedStore) tryPut(key, value string) error {
	return s.c.Submit(context.Background(), key, func(tx *Tx) (bool, error) {
		return true, tx.Bucket(testBucket).Put([]byte(key), []byte(value))
	})
}

// crashCopy copies the store file and its log as they are on disk now, as
// a crash would leave them (the open transaction is not in the file).
func (s *loggedStore) crashCopy(t *testing.T, withLog bool) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy.db")
	copyFile(t, s.path, dst)
	if withLog {
		copyFile(t, s.path+".wal", dst+".wal")
	}
	return dst
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// reopenKeys opens the store at path as Open would (log replayed) and
// returns its keys and values.
func reopenKeys(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l, err := OpenLog(db, path+".wal", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fileKeys(t, db)
}

func fileKeys(t *testing.T, db *bolt.DB) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(testBucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error { got[string(k)] = string(v); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func wantKeys(t *testing.T, what string, got map[string]string, keys ...string) {
	t.Helper()
	if len(got) != len(keys) {
		t.Errorf("%s: %d keys %v, want %v", what, len(got), got, keys)
	}
	for _, k := range keys {
		if _, ok := got[k]; !ok {
			t.Errorf("%s: key %q missing (have %v)", what, k, got)
		}
	}
}

// Every acknowledged batch is in the log and replays after a crash; the
// bbolt file alone does not have them (the log is what makes them durable).
func TestLogReplaysAcknowledgedBatches(t *testing.T) {
	s := openLogged(t, filepath.Join(t.TempDir(), "a.db"), 0, CommitterOptions{})
	for i := range 5 {
		s.put(t, fmt.Sprint("k", i), "v")
	}
	wantKeys(t, "file alone", reopenKeys(t, s.crashCopy(t, false)))
	wantKeys(t, "file and log", reopenKeys(t, s.crashCopy(t, true)), "k0", "k1", "k2", "k3", "k4")
}

// A torn last record is not replayed, and what comes before it is.
func TestLogTornTailStopsReplay(t *testing.T) {
	s := openLogged(t, filepath.Join(t.TempDir(), "a.db"), 0, CommitterOptions{})
	s.put(t, "k0", "v")
	s.put(t, "k1", "v")
	end := s.c.opts.Log.off
	cp := s.crashCopy(t, true)
	f, err := os.OpenFile(cp+".wal", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, end-1); err != nil { // the last byte of the last record
		t.Fatal(err)
	}
	f.Close()
	wantKeys(t, "torn", reopenKeys(t, cp), "k0")
}

// Close checkpoints: the file alone then holds every batch, and a reopen
// replays nothing stale over it.
func TestLogCloseCheckpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	s := openLogged(t, path, 0, CommitterOptions{})
	s.put(t, "k0", "v0")
	s.put(t, "k0", "v1")
	s.close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := fileKeys(t, db)
	db.Close()
	if got["k0"] != "v1" || len(got) != 1 {
		t.Fatalf("file after Close: %v, want k0=v1", got)
	}
	if got := reopenKeys(t, path); got["k0"] != "v1" || len(got) != 1 {
		t.Fatalf("reopened: %v, want k0=v1", got)
	}
}

// A full log checkpoints and starts over; after a crash the file and the
// log still hold every acknowledged batch, and the file alone holds those
// before the last checkpoint.
func TestLogFullCheckpoints(t *testing.T) {
	s := openLogged(t, filepath.Join(t.TempDir(), "a.db"), 512, CommitterOptions{})
	var keys []string
	gens := map[uint64]bool{}
	for i := 0; i < 40 || s.c.opts.Log.off == 0; i++ { // end with batches in the log, not just checkpointed
		k := fmt.Sprintf("k%02d", i)
		keys = append(keys, k)
		s.put(t, k, "0123456789abcdef0123456789abcdef")
		gens[s.c.opts.Log.gen] = true
	}
	if len(gens) < 3 {
		t.Fatalf("%d log generations in %d batches in a 512-byte log: no checkpoints", len(gens), len(keys))
	}
	wantKeys(t, "file and log", reopenKeys(t, s.crashCopy(t, true)), keys...)
	if alone := reopenKeys(t, s.crashCopy(t, false)); len(alone) == 0 || len(alone) == len(keys) {
		t.Errorf("file alone has %d of %d keys: want the checkpointed ones only", len(alone), len(keys))
	}
}

// A snapshot restored beside the live log replays at most its exact
// continuation: the batches written after it while the log was in the
// snapshot's generation, and nothing once the log has moved on.
func TestLogSnapshotRestore(t *testing.T) {
	s := openLogged(t, filepath.Join(t.TempDir(), "a.db"), 512, CommitterOptions{})
	s.put(t, "before", "v")
	snap := filepath.Join(t.TempDir(), "snap.db")
	err := s.c.Snapshot(func(tx *bolt.Tx) error { return tx.CopyFile(snap, 0o600) })
	if err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(t.TempDir(), "first.db")
	copyFile(t, snap, first)
	wantKeys(t, "snapshot alone", reopenKeys(t, snap), "before")

	s.put(t, "after", "v")
	copyFile(t, s.path+".wal", first+".wal")
	wantKeys(t, "snapshot + log of its generation", reopenKeys(t, first), "before", "after")

	err = s.c.Snapshot(func(tx *bolt.Tx) error { return tx.CopyFile(snap, 0o600) })
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(snap + ".wal")
	s.put(t, "later", "v")
	old := filepath.Join(t.TempDir(), "old.db")
	copyFile(t, snap, old)
	for range 30 { // several checkpoints: the log moves past the snapshot's generation
		s.put(t, "churn", "0123456789abcdef0123456789abcdef")
	}
	copyFile(t, s.path+".wal", old+".wal")
	wantKeys(t, "snapshot + a later generation's log", reopenKeys(t, old), "before", "after")
}

// Another store's log is never replayed.
func TestLogForeignLogIgnored(t *testing.T) {
	a := openLogged(t, filepath.Join(t.TempDir(), "a.db"), 0, CommitterOptions{})
	b := openLogged(t, filepath.Join(t.TempDir(), "b.db"), 0, CommitterOptions{})
	a.put(t, "a", "v")
	b.put(t, "b", "v")
	cp := a.crashCopy(t, false)
	copyFile(t, b.path+".wal", cp+".wal")
	wantKeys(t, "a's file with b's log", reopenKeys(t, cp))
}

// A batch whose log write fails is never seen — not by a view, not after a
// reopen — and the Committer fails for good.
func TestLoggedFailedBatchInvisible(t *testing.T) {
	fail := false
	s := openLogged(t, filepath.Join(t.TempDir(), "a.db"), 0, CommitterOptions{BeforeCommit: func() error {
		if fail {
			return errors.New("disk gone")
		}
		return nil
	}})
	s.put(t, "k0", "v")
	fail = true
	err := s.c.Submit(context.Background(), "", func(tx *Tx) (bool, error) {
		return true, tx.Bucket(testBucket).Put([]byte("k1"), []byte("v"))
	})
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("Submit over a failing log: %v, want ErrFailed", err)
	}
	if err := s.c.View(func(*Tx) error { return nil }); !errors.Is(err, ErrFailed) {
		t.Fatalf("View after the failure: %v, want ErrFailed", err)
	}
	cp := s.crashCopy(t, true)
	wantKeys(t, "reopened after the failure", reopenKeys(t, cp), "k0")
}

// Views see what the batches before them wrote; a view cannot write.
func TestLoggedViewReadsOpenTransaction(t *testing.T) {
	s := openLogged(t, filepath.Join(t.TempDir(), "a.db"), 0, CommitterOptions{})
	s.put(t, "k0", "v0")
	err := s.c.View(func(tx *Tx) error {
		if v := tx.Bucket(testBucket).Get([]byte("k0")); string(v) != "v0" {
			t.Errorf("view reads %q, want v0", v)
		}
		if err := tx.Bucket(testBucket).Put([]byte("x"), nil); !errors.Is(err, ErrReadOnly) {
			t.Errorf("Put in a view: %v, want ErrReadOnly", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A whole record that does not apply to the store fails the open.
func TestLogRecordThatDoesNotApply(t *testing.T) {
	s := openLogged(t, filepath.Join(t.TempDir(), "a.db"), 0, CommitterOptions{})
	err := s.c.Submit(context.Background(), "", func(tx *Tx) (bool, error) {
		b, err := tx.CreateBucketIfNotExists([]byte("new"))
		if err != nil {
			return false, err
		}
		return true, b.Put([]byte("k"), []byte("v"))
	})
	if err != nil {
		t.Fatal(err)
	}
	cp := s.crashCopy(t, true)
	wal, err := os.ReadFile(cp + ".wal")
	if err != nil {
		t.Fatal(err)
	}
	payload, n := parseRecord(wal, s.c.opts.Log.id, s.c.opts.Log.gen, 0)
	if n == 0 {
		t.Fatal("no record at the start of the log")
	}
	// drop the bucket's creation from the record and re-seal it
	var rec recorder
	rec.put([]byte("new"), []byte("k"), []byte("v"))
	if len(payload) <= len(rec.buf) {
		t.Fatalf("payload %x does not start with a creation", payload)
	}
	l := &Log{id: s.c.opts.Log.id, gen: s.c.opts.Log.gen}
	f, err := os.OpenFile(cp+".wal", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.f, l.size = f, DefaultLogSize
	if err := l.append(rec.buf, true); err != nil {
		t.Fatal(err)
	}
	f.Close()
	db, err := bolt.Open(cp, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := OpenLog(db, cp+".wal", 0); !errors.Is(err, ErrLogCorrupt) {
		t.Fatalf("OpenLog: %v, want ErrLogCorrupt", err)
	}
}
