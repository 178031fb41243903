package boltstore

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence/fencetest"
	"github.com/fencegate/fencegate/internal/lossyfs"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/protocol"
)

var powerCuts = flag.Int("powercut.cuts", 20, "power cuts of TestPowerCutGrants (a long campaign: 500)")

const (
	powerCutChildEnv  = "FENCEGATE_BOLTSTORE_POWERCUT_CHILD"  // the store path: run as the child
	powerCutNoSyncEnv = "FENCEGATE_BOLTSTORE_POWERCUT_NOSYNC" // "1": the child's bbolt skips fsync (mutation)
	powerCutFile      = "leases.db"
	powerCutDomains   = 3
)

// TestPowerCutChild is the child process of the power-cut loops; run on
// its own it does nothing.
func TestPowerCutChild(t *testing.T) {
	path := os.Getenv(powerCutChildEnv)
	if path == "" {
		t.Skip("child of TestPowerCutGrants only")
	}
	powerCutChild(path, os.Getenv(powerCutNoSyncEnv) == "1")
}

// TestPowerCutGrants is I1 across power loss: a child controller on a
// bbolt store on a lossyfs mount grants and releases leases in several
// domains and prints every token it handed out; the power is cut at random
// moments (half the cuts tear the last unsynced writes). Every token
// handed out before a cut must be lower than every token handed out after
// it, per domain, and the store's seq must be at least every one of them.
func TestPowerCutGrants(t *testing.T) {
	m := lossyfs.MustMount(t)
	start := time.Now()
	g, err := powerCutLoop(t, m, *powerCuts, false)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("%d power cuts in %v (%.0f cuts/min): %s", *powerCuts, took.Round(time.Millisecond),
		float64(*powerCuts)/took.Minutes(), g)
	if g.grants < *powerCuts {
		t.Fatalf("only %d grants in %d cuts: the loop did not exercise the controller", g.grants, *powerCuts)
	}
}

// TestPowerCutGrantsCatchesMissingFsync is the mutation check: with the
// child's bbolt opened NoSync, the loop must see a token handed out again
// (or lower) after a cut within a few cuts.
func TestPowerCutGrantsCatchesMissingFsync(t *testing.T) {
	m := lossyfs.MustMount(t)
	const within = 5
	g, err := powerCutLoop(t, m, within, true)
	if err == nil {
		t.Fatalf("%d power cuts of a store that never fsyncs its commits found no violation (%s)", within, g)
	}
	t.Logf("caught: %v (%s)", err, g)
}

// grantModel is what the parent knows: per domain the highest token
// (epoch, seq) handed out in an earlier round.
type grantModel struct {
	high         map[string][2]uint64
	grants, cuts int
	unsynced     int
}

func (g *grantModel) String() string {
	return fmt.Sprintf("%d grants over %d cuts, %d unsynced writes caught by the cuts", g.grants, g.cuts, g.unsynced)
}

// powerCutLoop runs cuts rounds of child grants and power cut and returns
// the first violation of I1.
func powerCutLoop(t *testing.T, m *lossyfs.Mount, cuts int, noSync bool) (*grantModel, error) {
	t.Helper()
	g := &grantModel{high: map[string][2]uint64{}}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	for i := range cuts {
		opts := lossyfs.CutOptions{Torn: rand.IntN(2) == 0}
		acks, rep, err := m.RunAndCut(powerCutCommand(m, noSync), time.Duration(rand.IntN(200))*time.Millisecond, opts)
		if err != nil {
			t.Fatalf("cut %d: %v", i, err)
		}
		g.cuts, g.unsynced = i+1, g.unsynced+rep.Writes
		if err := g.round(acks); err != nil {
			return g, fmt.Errorf("cut %d: %w", i, err)
		}
		if err := copyStoreOut(m, copyPath); err != nil {
			t.Fatalf("cut %d: %v", i, err)
		}
		if err := g.checkStore(copyPath); err != nil {
			return g, fmt.Errorf("cut %d: %w", i, err)
		}
	}
	return g, nil
}

// copyStoreOut copies the store file and its log out of the mount to path
// and LogPath(path).
func copyStoreOut(m *lossyfs.Mount, path string) error {
	if err := m.CopyOut(powerCutFile, path); err != nil {
		return err
	}
	return m.CopyOut(filepath.Base(LogPath(powerCutFile)), LogPath(path))
}

// round checks one round's grants ("grant domain epoch seq" lines, in the
// order each domain's worker printed them) against the earlier rounds,
// then raises the model to them.
func (g *grantModel) round(acks []string) error {
	seen := map[string][2]uint64{}
	for _, a := range acks {
		domain, pos, err := parseGrant(a)
		if err != nil {
			return err
		}
		if old, ok := g.high[domain]; ok && !after(pos, old) {
			return fmt.Errorf("%s: token %v handed out after the cut, not above %v handed out before it", domain, pos, old)
		}
		if prev, ok := seen[domain]; ok && !after(pos, prev) {
			return fmt.Errorf("%s: token %v handed out after %v", domain, pos, prev)
		}
		seen[domain] = pos
		g.grants++
	}
	for d, pos := range seen {
		g.high[d] = pos
	}
	return nil
}

func after(a, b [2]uint64) bool { return a[0] > b[0] || a[0] == b[0] && a[1] > b[1] }

func parseGrant(line string) (string, [2]uint64, error) {
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "grant" {
		return "", [2]uint64{}, fmt.Errorf("unparsable acknowledgement %q", line)
	}
	epoch, err1 := strconv.ParseUint(f[2], 10, 64)
	seq, err2 := strconv.ParseUint(f[3], 10, 64)
	if err1 != nil || err2 != nil {
		return "", [2]uint64{}, fmt.Errorf("unparsable acknowledgement %q", line)
	}
	return f[1], [2]uint64{epoch, seq}, nil
}

// checkStore opens the store as the cut left it (a copy: the test process
// must not map files of the mount it serves) and requires its epoch and
// every domain's seq to be at least every token handed out.
func (g *grantModel) checkStore(path string) error {
	st, err := Open(path, Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	for domain, pos := range g.high {
		rec, err := st.Load(context.Background(), domain)
		if err != nil {
			return err
		}
		if after(pos, [2]uint64{st.epoch, rec.Seq}) {
			return fmt.Errorf("%s: store at (%d, %d) after the cut, below handed-out %v", domain, st.epoch, rec.Seq, pos)
		}
	}
	return nil
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

// powerCutChild runs a controller on the store at path (Open fsyncs the
// directory of a file it creates: before that fix the first cut lost the
// whole store), prints Ready, then acquires and releases leases in every
// domain, printing each token once Do returned it.
func powerCutChild(path string, noSync bool) {
	st, err := Open(path, Options{})
	if err != nil {
		childExit("open", err)
	}
	st.db.NoSync = noSync // the mutation: commits are no longer fsynced
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := lease.New(ctx, lease.Config{Store: st, Signer: fencetest.MustSigner(nopTB{}, 0)})
	if err != nil {
		childExit("controller", err)
	}
	var outMu sync.Mutex
	ack := func(line string) {
		outMu.Lock()
		fmt.Fprintln(os.Stdout, line) // one write(2): atomic in the pipe
		outMu.Unlock()
	}
	ack(lossyfs.Ready)
	var wg sync.WaitGroup
	for d := range powerCutDomains {
		wg.Go(func() { grantWorker(ctx, c, fmt.Sprintf("line%d", d), ack) })
	}
	wg.Wait()
	os.Exit(0) // only reached if the parent never cut the power
}

// grantWorker acquires and releases domain until ctx ends.
func grantWorker(ctx context.Context, c *lease.Controller, domain string, ack func(string)) {
	for i := 0; ctx.Err() == nil; i++ {
		req := protocol.Request{RequestID: fmt.Sprintf("r%d-%d", os.Getpid(), i), Holder: "h", TTLms: 60000}
		resp := c.Do(ctx, protocol.OpAcquire, domain, req)
		if !resp.OK {
			childExit("acquire", fmt.Errorf("%s: %s %s", domain, resp.Code, resp.Message))
		}
		tok, err := c.VerifyToken(resp.Token)
		if err != nil {
			childExit("verify", err)
		}
		ack(fmt.Sprintf("grant %s %d %d", domain, tok.Epoch, tok.Seq))
		if resp := c.Do(ctx, protocol.OpRelease, domain, protocol.Request{Token: resp.Token}); !resp.OK {
			childExit("release", fmt.Errorf("%s: %s %s", domain, resp.Code, resp.Message))
		}
	}
}

func childExit(what string, err error) {
	fmt.Fprintf(os.Stderr, "power-cut child %s: %v\n", what, err)
	os.Exit(2)
}

// nopTB lets the child use fencetest outside a test.
type nopTB struct{ testing.TB }

func (nopTB) Helper()                   {}
func (nopTB) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (nopTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
