package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/internal/groupcommit"
	"github.com/fencegate/fencegate/lease"
)

// a21Schema1WithLog writes a schema 1 store at path (records carrying
// their requests, as the store wrote them before this change) holding
// version fileV[i] of each model domain, then runs the old store's write
// path — a logged Committer putting each record's JSON, requests in it —
// up to version logV[i], interleaving the domains, and returns a crash
// image of it: the file with fileV, the log with every batch after it,
// none replayed (an old controller SIGKILLed before any checkpoint).
func a21Schema1WithLog(t *testing.T, path string, ds []a21Domain, fileV, logV []int) string {
	t.Helper()
	recs := map[string]lease.Record{}
	for i, d := range ds {
		if fileV[i] > 0 {
			recs[d.name] = d.record(fileV[i])
		}
	}
	writeSchema1(t, path, recs)
	db, err := groupcommit.OpenDB(path, 0o600, &bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log, err := groupcommit.OpenLog(db, LogPath(path), 0) // the old store's 16 MiB log
	if err != nil {
		t.Fatal(err)
	}
	c, err := groupcommit.NewCommitter(db, groupcommit.CommitterOptions{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ver := append([]int(nil), fileV...)
	for more := true; more; {
		more = false
		for i, d := range ds {
			for range 1 + i%3 {
				if ver[i] >= logV[i] {
					break
				}
				ver[i]++
				more = true
				v, err := json.Marshal(d.record(ver[i]))
				if err != nil {
					t.Fatal(err)
				}
				err = c.Submit(context.Background(), d.name, func(tx *groupcommit.Tx) (bool, error) {
					return true, tx.Bucket(bucketDomains).Put([]byte(d.name), v)
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	crashed := a21CrashImage(t, path)
	if err := a21FileVersions(crashed, ds, fileV); err != nil {
		t.Fatalf("the crash image's file: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return crashed
}

// a21CheckSchema2 opens the closed store file at path with bbolt and
// wants schema 2 and no record carrying its requests.
func a21CheckSchema2(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keySchema); string(v) != "2" {
			return fmt.Errorf("schema %q, want 2", v)
		}
		return tx.Bucket(bucketDomains).ForEach(func(k, v []byte) error {
			if bytes.Contains(v, []byte(`"requests"`)) {
				return fmt.Errorf("domain %q still carries its requests: %.80s", k, v)
			}
			return nil
		})
	})
}

// TestAttack21Schema1FileWithUnreplayedLog: an old controller (schema 1,
// requests inside each record) crashed with batches in its log that its
// file lacks. The new Open replays the log (old-layout records, over the
// old-layout file) and then moves the requests out: every domain must
// load as its last logged version, requests and all, the file must be
// schema 2 throughout, and grants must go on from there across a reopen.
func TestAttack21Schema1FileWithUnreplayedLog(t *testing.T) {
	ctx := context.Background()
	ds := a21Domains()
	fileV, logV := make([]int, len(ds)), make([]int, len(ds))
	for i := range ds {
		fileV[i] = []int{0, 1, 40, 120}[i%4]
		logV[i] = fileV[i] + []int{0, 3, 90}[i%3]
	}
	path := a21Schema1WithLog(t, filepath.Join(t.TempDir(), "old.db"), ds, fileV, logV)
	st := a21Open(t, path)
	if _, err := a21CheckAll(ctx, st, ds, logV, logV); err != nil {
		st.Close()
		t.Fatalf("after the upgrade's replay and move: %v", err)
	}
	ver := append([]int(nil), logV...)
	for i, d := range ds {
		for range 30 {
			if ver[i] < d.maxV {
				ver[i]++
				if err := d.put(ctx, st, ver[i]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a21CheckSchema2(path); err != nil {
		t.Fatal(err)
	}
	st = a21Open(t, path)
	defer st.Close()
	if _, err := a21CheckAll(ctx, st, ds, ver, ver); err != nil {
		t.Fatalf("after grants and a reopen: %v", err)
	}
}

// a21FileVersions wants the bbolt file at path (its log not replayed)
// to hold version want[i] of each domain: the log is what holds more.
func a21FileVersions(path string, ds []a21Domain, want []int) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		for i, d := range ds {
			var r lease.Record
			if v := tx.Bucket(bucketDomains).Get([]byte(d.name)); v != nil {
				if err := json.Unmarshal(v, &r); err != nil {
					return err
				}
			}
			if int(r.Version) != want[i] {
				return fmt.Errorf("domain %q at version %d in the file, want %d", d.name, r.Version, want[i])
			}
		}
		return nil
	})
}
