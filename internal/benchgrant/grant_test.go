package benchgrant

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/internal/benchload"
	"github.com/fencegate/fencegate/lease/boltstore"
)

// TestEveryOpIsANewGrant runs 3 domains × 4 operations on bbolt and wants
// each domain's live lease to be the 4th token minted there.
func TestEveryOpIsANewGrant(t *testing.T) {
	ctx := context.Background()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "leases.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := New(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := benchload.Run(ctx, 3, benchload.Limit{Ops: 12}, l.Op); err != nil {
		t.Fatal(err)
	}
	live, err := l.ctrl.LiveLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seqs := map[string]uint64{}
	for _, tok := range live {
		seqs[tok.Domain] = tok.Seq
	}
	for dev := range 3 {
		if seqs[Domain(dev)] != 4 {
			t.Errorf("domain %s: live token seq %d, want 4 (one new token per op); all: %v", Domain(dev), seqs[Domain(dev)], seqs)
		}
	}
}

// TestOpFailsWhenNotGranted: an operation the controller does not grant
// is an error (a closed store), not a silently counted grant.
func TestOpFailsWhenNotGranted(t *testing.T) {
	ctx := context.Background()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "leases.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := l.Op(ctx, 0, 0); err == nil {
		t.Fatal("a grant on a closed store succeeded")
	}
}
