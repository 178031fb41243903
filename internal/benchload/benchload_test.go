package benchload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/fencegate/fencegate/persist"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAcceptLoadIsDurable(t *testing.T) {
	const devices, perDevice = 3, 5
	tests := []struct {
		name       string
		steady     bool
		wantSeq    uint64
		wantRaised int64
	}{
		{"advancing token", false, perDevice, devices * perDevice},
		{"steady token", true, 1, devices},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tokens := mustTokens(t, devices, perDevice)
			path := filepath.Join(t.TempDir(), "fence.db")
			load, err := OpenAcceptLoad(path, tokens, devices, tc.steady)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(t.Context(), devices, Limit{Ops: devices * perDevice}, load.Op)
			if err != nil {
				t.Fatal(err)
			}
			commits, ops := load.Commits()
			if res.Ops != devices*perDevice || ops != int64(res.Ops) || commits < 1 || commits > ops {
				t.Fatalf("ran %d ops, %d committed in %d commits", res.Ops, ops, commits)
			}
			if load.Raised() != tc.wantRaised {
				t.Fatalf("raised %d fences, want %d", load.Raised(), tc.wantRaised)
			}
			if err := load.Close(); err != nil {
				t.Fatal(err)
			}
			checkReopened(t, path, devices, perDevice, func(dev int) string { return tokens.At(dev, int(tc.wantSeq)-1).Raw })
		})
	}
}

// checkReopened opens the store file at path again and checks that every
// device's fence is the token wantFence and its journal holds its commands
// cmd-0..perDevice-1 in order, in doubt (accepted, never completed).
func checkReopened(t *testing.T, path string, devices, perDevice int, wantFence func(dev int) string) {
	t.Helper()
	s, err := persist.Open(path, persist.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := len(s.InDoubtAtOpen()); got != devices*perDevice {
		t.Errorf("%d commands in doubt at reopen, want %d", got, devices*perDevice)
	}
	fences, err := s.Fences()
	if err != nil {
		t.Fatal(err)
	}
	for dev := range devices {
		if got := fences[DeviceID(dev)].Token.Raw; got != wantFence(dev) {
			t.Errorf("%s fence %q, want %q", DeviceID(dev), got, wantFence(dev))
		}
		checkJournal(t, s, DeviceID(dev), perDevice)
	}
}

func checkJournal(t *testing.T, s *persist.Store, device string, n int) {
	t.Helper()
	recs, err := s.Journal(device)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("%s journal holds %d records, want %d", device, len(recs), n)
	}
	for i, r := range recs {
		if r.ID != CommandID(i) || r.State != persist.StateInDoubt {
			t.Errorf("%s journal[%d] = %s %s, want %s in_doubt", device, i, r.ID, r.State, CommandID(i))
		}
	}
}

func TestRunSplitsOpsOverDevices(t *testing.T) {
	var (
		mu   sync.Mutex
		seen = make([][]int, 3)
	)
	res, err := Run(t.Context(), 3, Limit{Ops: 7}, func(_ context.Context, dev, i int) error {
		mu.Lock()
		defer mu.Unlock()
		seen[dev] = append(seen[dev], i)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0, 1, 2}, {0, 1}, {0, 1}}
	for dev := range want {
		if !slices.Equal(seen[dev], want[dev]) {
			t.Errorf("device %d ran %v, want %v", dev, seen[dev], want[dev])
		}
	}
	if res.Ops != 7 || len(res.Latencies) != 7 || !slices.IsSorted(res.Latencies) {
		t.Fatalf("result: %d ops, latencies %v", res.Ops, res.Latencies)
	}
}

func TestRunStopsEveryDeviceAtFirstError(t *testing.T) {
	boom := errors.New("boom")
	res, err := Run(t.Context(), 4, Limit{Duration: time.Hour}, func(ctx context.Context, dev, i int) error {
		if dev == 2 && i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if res.Ops < 3 {
		t.Fatalf("%d ops counted, want at least the 3 before the failure", res.Ops)
	}
}

func TestRunRejectsBadArguments(t *testing.T) {
	tests := []struct {
		name    string
		devices int
		lim     Limit
	}{
		{"no devices", 0, Limit{Ops: 1}},
		{"no bound", 1, Limit{}},
		{"both bounds", 1, Limit{Ops: 1, Duration: time.Second}},
		{"negative ops", 1, Limit{Ops: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(t.Context(), tc.devices, tc.lim, func(context.Context, int, int) error { return nil })
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestBoltLoadIsDurable(t *testing.T) {
	tests := []struct {
		name  string
		batch bool
	}{
		{"update each", false},
		{"batch", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bolt.db")
			load, err := OpenBoltLoad(path, 2, tc.batch, RecordValue("fg1.x.y"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Run(t.Context(), 2, Limit{Ops: 10}, load.Op); err != nil {
				t.Fatal(err)
			}
			commits, err := load.Commits()
			if err != nil {
				t.Fatal(err)
			}
			if commits < 1 || commits > 10 || (!tc.batch && commits != 10) {
				t.Fatalf("%d commits for 10 operations", commits)
			}
			if err := load.Close(); err != nil {
				t.Fatal(err)
			}
			if got := countKeys(t, path); got != 10 {
				t.Fatalf("%d records after reopen, want 10", got)
			}
		})
	}
}

func countKeys(t *testing.T, path string) int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			n += b.Stats().KeyN
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRawFsyncSyncsAndCleansUp(t *testing.T) {
	dir := t.TempDir()
	res, err := RawFsync(t.Context(), dir, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops < 1 || len(res.Latencies) != res.Ops {
		t.Fatalf("result: %d ops, %d latencies", res.Ops, len(res.Latencies))
	}
	if _, err := os.Stat(filepath.Join(dir, RawFsyncFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("scratch file left behind: %v", err)
	}
}

func TestPercentile(t *testing.T) {
	r := Result{Latencies: []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
	tests := []struct {
		name string
		r    Result
		q    float64
		want time.Duration
	}{
		{"median", r, 0.5, 5},
		{"p99", r, 0.99, 10},
		{"p10", r, 0.1, 1},
		{"tiny q", r, 0.0001, 1},
		{"empty", Result{}, 0.5, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Percentile(tc.q); got != tc.want {
				t.Fatalf("Percentile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestTokensAdvanceAndClamp(t *testing.T) {
	p := mustTokens(t, 2, 3)
	for i := range 3 {
		if got := p.At(1, i); got.Seq != uint64(i+1) || got.Raw == "" || got.Domain != TokenDomain(1) {
			t.Fatalf("At(1, %d) = %v raw %q", i, got, got.Raw)
		}
	}
	if got := p.At(1, 10); got.Raw != p.At(1, 2).Raw {
		t.Fatalf("At past the end = %v, want the last token", got)
	}
}

func mustTokens(t *testing.T, devices, n int) *Tokens {
	t.Helper()
	p, err := NewTokens()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Grow(devices, n); err != nil {
		t.Fatal(err)
	}
	return p
}
