package boltstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/lease/leasetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bg = context.Background()

// TestStoreSuite runs the shared Store contract and lease scenarios on bbolt.
func TestStoreSuite(t *testing.T) {
	leasetest.RunStoreSuite(t, func(t testing.TB) leasetest.Opener {
		path := filepath.Join(t.TempDir(), "leases.db")
		return func(t testing.TB) lease.Store {
			st, err := boltstore.Open(path, boltstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
	})
}

// shared presents one bbolt store as lease.Shared, as if its two users
// were replicas on a replicated store; Close is left to the test.
type shared struct{ *boltstore.Store }

func (shared) Shared() bool { return true }
func (shared) Close() error { return nil }

// TestReplicaSuite runs the replica scenarios on one bbolt store shared by
// two controllers in one process: the controller's Shared mode without
// etcd.
func TestReplicaSuite(t *testing.T) {
	leasetest.RunReplicas(t, func(t testing.TB) leasetest.Opener {
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "leases.db"), boltstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := st.Close(); err != nil {
				t.Error(err)
			}
		})
		return func(testing.TB) lease.Store { return shared{st} }
	})
}
