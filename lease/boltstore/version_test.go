package boltstore

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/internal/groupcommit"
	"github.com/fencegate/fencegate/lease"
)

// TestStoredVersion: the version Put compares is read from the start of a
// record as put writes it, from anywhere in a record written otherwise
// (decoded in full), and a record that does not decode is corrupt, as a
// full decode says.
func TestStoredVersion(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "v.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tests := []struct {
		name    string
		stored  func(tx *bolt.Tx) error
		want    uint64
		corrupt bool
	}{
		{"as Put writes it", rawRecord(asJSON(t, lease.Record{Version: 41, Seq: 9, Requests: []lease.RequestRecord{{ID: "r1", Seq: 9}}})), 41, false},
		{"never written", func(*bolt.Tx) error { return nil }, 0, false},
		{"version not first", rawRecord(`{"seq":3,"requests":[{"id":"x"}],"version":7}`), 7, false},
		{"prefix, then no number", rawRecord(`{"version":"7"}`), 0, true},
		{"garbage", rawRecord(`{"vers`), 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucketIfNotExists(bucketDomains)
				if err != nil {
					return err
				}
				if err := b.Delete([]byte("d")); err != nil {
					return err
				}
				if err := tc.stored(tx); err != nil {
					return err
				}
				got, err := storedVersion(groupcommit.Wrap(tx), "d")
				if tc.corrupt {
					if !errors.Is(err, lease.ErrCorrupt) {
						t.Errorf("err = %v, want lease.ErrCorrupt", err)
					}
					return nil
				}
				if err != nil || got != tc.want {
					t.Errorf("storedVersion = %d, %v; want %d", got, err, tc.want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func asJSON(t *testing.T, rec lease.Record) string {
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func rawRecord(v string) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error { return tx.Bucket(bucketDomains).Put([]byte("d"), []byte(v)) }
}
