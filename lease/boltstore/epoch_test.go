package boltstore_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/boltstore"
)

// TestEpochFromWrongClock (issue 11 item 9, store creation): a new store
// is not created while the clock is before the build date, unless its
// epoch is given; an existing store opens whatever the clock says.
func TestEpochFromWrongClock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	behind := func() time.Time { return time.Date(1970, 1, 1, 0, 0, 42, 0, time.UTC) }
	_, err := boltstore.Open(path, boltstore.Options{Now: behind})
	if !errors.Is(err, lease.ErrClockBehind) || !strings.Contains(err.Error(), "epoch") {
		t.Fatalf("new store with a clock in 1970: %v, want lease.ErrClockBehind telling to give the epoch", err)
	}
	if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("the refused store file exists: %v", serr)
	}
	const given = uint64(1_900_000_000_000)
	st, err := boltstore.Open(path, boltstore.Options{Now: behind, Epoch: given})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := st.Epoch(bg); e != given {
		t.Fatalf("epoch %d, want the given %d", e, given)
	}
	st.Close()
	st, err = boltstore.Open(path, boltstore.Options{Now: behind})
	if err != nil {
		t.Fatalf("an existing store with a clock behind: %v", err)
	}
	defer st.Close()
	if e, _ := st.Epoch(bg); e != given {
		t.Fatalf("epoch after reopen %d, want %d", e, given)
	}
}
