package persist

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/lossyfs"
)

var powerCuts = flag.Int("powercut.cuts", 20, "power cuts of TestPowerCutLoop (a long campaign: 1000)")

const (
	powerCutChildEnv  = "FENCEGATE_PERSIST_POWERCUT_CHILD"  // the store path: run as the child
	powerCutNoSyncEnv = "FENCEGATE_PERSIST_POWERCUT_NOSYNC" // "1": the child's bbolt skips fsync (mutation)
	powerCutFile      = "fence.db"
)

// TestPowerCutChild is the child process of the power-cut loops; run on
// its own it does nothing.
func TestPowerCutChild(t *testing.T) {
	path := os.Getenv(powerCutChildEnv)
	if path == "" {
		t.Skip("child of TestPowerCutLoop only")
	}
	powerCutChild(path, os.Getenv(powerCutNoSyncEnv) == "1")
}

// TestPowerCutLoop is TestCrashLoop with the power cut instead of the
// process killed: the store lives on a lossyfs mount, and after each kill
// every write not fsynced is dropped (half the cuts tear the last unsynced
// writes instead) before the store is reopened. Every acknowledged accept
// must be journaled (done with its result if that was acknowledged, else
// in_doubt), every domain fence must be at least every acknowledged token,
// and no id may be accepted fresh twice.
func TestPowerCutLoop(t *testing.T) {
	m := lossyfs.MustMount(t)
	start := time.Now()
	model, stats, err := powerCutLoop(t, m, *powerCuts, false)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("%d power cuts in %v (%.0f cuts/min): %d accepted, %d completed, %d duplicates, %d stale, %d raised; %s",
		*powerCuts, took.Round(time.Millisecond), float64(*powerCuts)/took.Minutes(),
		len(model.accepted), len(model.completed), model.duplicates, model.stale, model.raises, stats)
	if len(model.completed) == 0 || model.duplicates == 0 || model.stale == 0 {
		t.Fatal("the power-cut loop did not exercise completions, duplicates and stale tokens")
	}
}

// TestPowerCutLoopCatchesMissingFsync is the mutation check: the same
// loop with the child's bbolt opened NoSync (commits never fsynced) must
// report a violation within a few cuts — the loop can see a missing fsync.
func TestPowerCutLoopCatchesMissingFsync(t *testing.T) {
	m := lossyfs.MustMount(t)
	const within = 5
	_, stats, err := powerCutLoop(t, m, within, true)
	if err == nil {
		t.Fatalf("%d power cuts of a store that never fsyncs its commits found no violation (%s)", within, stats)
	}
	t.Logf("caught: %v (%s)", err, stats)
}

// cutStats counts what the cuts dropped.
type cutStats struct{ cuts, torn, dropped, files, acks int }

func (s cutStats) String() string {
	return fmt.Sprintf("%d cuts (%d torn), %d acknowledgements, %d unsynced writes caught by the cuts (%d file-cuts)",
		s.cuts, s.torn, s.acks, s.dropped, s.files)
}

// powerCutLoop runs cuts rounds of child work and power cut on the store
// on m, checking the model after each, and returns the first violation.
// env is added to the child's environment (GOMAXPROCS=1, say).
func powerCutLoop(t *testing.T, m *lossyfs.Mount, cuts int, noSync bool, env ...string) (*crashModel, cutStats, error) {
	t.Helper()
	model, stats := newCrashModel(), cutStats{}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	for i := range cuts {
		opts := lossyfs.CutOptions{Torn: rand.IntN(2) == 0}
		cmd := powerCutCommand(m, noSync)
		cmd.Env = append(cmd.Env, env...)
		acks, rep, err := m.RunAndCut(cmd, time.Duration(rand.IntN(200))*time.Millisecond, opts)
		if err != nil {
			t.Fatalf("cut %d: %v", i, err)
		}
		stats.cuts, stats.acks, stats.dropped, stats.files = i+1, stats.acks+len(acks), stats.dropped+rep.Writes, stats.files+rep.Files
		if opts.Torn {
			stats.torn++
		}
		if err := powerCutCheck(m, model, acks, copyPath); err != nil {
			return model, stats, fmt.Errorf("cut %d: %w", i, err)
		}
	}
	return model, stats, nil
}

// powerCutCommand is the child: this test binary running TestPowerCutChild.
func powerCutCommand(m *lossyfs.Mount, noSync bool) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestPowerCutChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), powerCutChildEnv+"="+filepath.Join(m.Dir(), powerCutFile))
	if noSync {
		cmd.Env = append(cmd.Env, powerCutNoSyncEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	return cmd
}

// powerCutCheck feeds the acknowledgements to the model and checks the
// store as the cut left it, on a copy: the test process serves the mount
// and must not map its files (see lossyfs).
func powerCutCheck(m *lossyfs.Mount, model *crashModel, acks []string, copyPath string) error {
	for _, a := range acks {
		if err := model.ack(a); err != nil {
			return err
		}
	}
	if err := m.CopyOut(powerCutFile, copyPath); err != nil {
		return err
	}
	if err := m.CopyOut(filepath.Base(LogPath(powerCutFile)), LogPath(copyPath)); err != nil {
		return err
	}
	return model.check(copyPath)
}

// powerCutChild opens the store (Open fsyncs the directory of a file it
// creates: before that fix the first cut lost the whole store), prints
// Ready and runs the crash loop's workers.
func powerCutChild(path string, noSync bool) {
	s, err := Open(path, crashOptions)
	if err != nil {
		childExit("open", err)
	}
	s.db.NoSync = noSync // the mutation: commits are no longer fsynced
	fences, err := s.DomainFences()
	if err != nil {
		childExit("fences", err)
	}
	var outMu sync.Mutex
	ack := func(format string, args ...any) {
		outMu.Lock()
		fmt.Fprintf(os.Stdout, format+"\n", args...) // one write(2): atomic in the pipe
		outMu.Unlock()
	}
	ack(lossyfs.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for d := range crashDevices {
		dev := fmt.Sprintf("dev%d", d)
		wg.Go(func() { crashWorker(ctx, s, dev, fences[crashDomain(dev)].Token.Seq, ack) })
	}
	wg.Wait()
	os.Exit(0) // only reached if the parent never cut the power
}

func childExit(what string, err error) {
	fmt.Fprintf(os.Stderr, "power-cut child %s: %v\n", what, err)
	os.Exit(2)
}
