package boltstore

import (
	"context"
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

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/internal/atomicfile"
	"github.com/fencegate/fencegate/internal/lossyfs"
)

const a21ChildEnv = "FENCEGATE_BOLTSTORE_A21_CHILD" // the store path: run as the child

// a21ReadyAfterOpenEnv, set, makes the child print Ready once Open has
// returned, so that the cut's random moment falls among the Puts however
// slow the machine is at replaying the log.
const a21ReadyAfterOpenEnv = "FENCEGATE_BOLTSTORE_A21_READY_AFTER_OPEN"

// a21Main is how many of a21Fleet's domains (the first) the child writes;
// the rest are fillers that make the schema 1 move long enough for a
// cut to land in it, and must come through it untouched.
var a21Main = len(a21Domains())

// a21Fleet is a21Domains and 150 filler domains.
func a21Fleet() []a21Domain {
	ds := a21Domains()
	for i := range 150 {
		ds = append(ds, a21NewDomain(fmt.Sprintf("filler-%03d", i), uint64(i)*1000, 1))
	}
	return ds
}

// TestAttack21PowerCutChild is the child of TestAttack21PowerCutFromSchema1;
// run on its own it does nothing.
func TestAttack21PowerCutChild(t *testing.T) {
	path := os.Getenv(a21ChildEnv)
	if path == "" {
		t.Skip("child of TestAttack21PowerCutFromSchema1 only")
	}
	a21Child(path, os.Getenv(a21ReadyAfterOpenEnv) != "")
}

// a21Child prints Ready (the power may go from then on: during Open's
// replay and move too, unless readyAfterOpen), opens the store and, one goroutine a domain,
// writes each main domain's next model versions, printing "ack i v" once
// Put returned version v of domain i.
func a21Child(path string, readyAfterOpen bool) {
	if !readyAfterOpen {
		fmt.Fprintln(os.Stdout, lossyfs.Ready)
	}
	st, err := Open(path, Options{})
	if err != nil {
		childExit("open", err)
	}
	if readyAfterOpen {
		fmt.Fprintln(os.Stdout, lossyfs.Ready)
	}
	ctx := context.Background()
	ds := a21Fleet()[:a21Main]
	var outMu sync.Mutex
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() {
			rec, err := st.Load(ctx, d.name)
			if err != nil {
				childExit("load", err)
			}
			for v := int(rec.Version) + 1; v <= min(d.maxV, int(rec.Version)+a21RoundPuts); v++ {
				if err := d.put(ctx, st, v); err != nil {
					childExit("put", err)
				}
				outMu.Lock()
				fmt.Fprintf(os.Stdout, "ack %d %d\n", i, v)
				outMu.Unlock()
			}
		})
	}
	wg.Wait()
	time.Sleep(time.Hour) // until the cut: the next round goes on from here
}

// a21RoundPuts bounds the versions a child writes per domain, so that
// the histories last through the cuts.
const a21RoundPuts = 40

// a21CopyIn copies the file at src into the mount as name, durably.
func a21CopyIn(t *testing.T, m *lossyfs.Mount, src, name string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(m.Dir(), name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.SyncDir(m.Dir()); err != nil {
		t.Fatal(err)
	}
}

// TestAttack21PowerCutFromSchema1 starts from an old controller's crash
// (a schema 1 file, its log holding batches the file lacks) on a lossyfs
// mount, and cuts the power under a child store at random moments — in
// its first Open's replay or move, or while it writes model histories
// in every main domain (neighbouring names, seq 0 to MaxUint64, drops in
// the middle), half the cuts tearing the unsynced writes. After every
// cut the store must open and every domain must be exactly a model
// version: no acknowledged Put lost (at least the highest acked version,
// and never below what an earlier open found), nothing dropped coming
// back, nothing half-moved, the fillers as the old controller left them,
// the epoch the file's.
func TestAttack21PowerCutFromSchema1(t *testing.T) {
	m := lossyfs.MustMount(t)
	ctx := context.Background()
	ds := a21Fleet()
	fileV, logV := make([]int, len(ds)), make([]int, len(ds))
	for i := range ds {
		fileV[i], logV[i] = 200, 200
		if i < a21Main {
			fileV[i] = []int{0, 1, 40, 120}[i%4]
			logV[i] = fileV[i] + []int{0, 3, 60}[i%3]
		}
	}
	old := a21Schema1WithLog(t, filepath.Join(t.TempDir(), "old.db"), ds, fileV, logV)
	a21CopyIn(t, m, old, powerCutFile)
	a21CopyIn(t, m, LogPath(old), filepath.Base(LogPath(powerCutFile)))

	floor := append([]int(nil), logV...)
	acks, beforeMove, amongPuts := 0, 0, 0
	const cuts = 16
	for cut := range cuts {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAttack21PowerCutChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), a21ChildEnv+"="+filepath.Join(m.Dir(), powerCutFile))
		cmd.Stderr = os.Stderr
		// The first open (replay and move of 166 domains) takes most of a
		// second on the mount: the first cuts come during it, then one
		// lets it finish (or no open would ever get through the move),
		// and from then on the child is ready once open, so that the cuts
		// fall among its Puts on a slow machine too.
		if cut > 5 {
			cmd.Env = append(cmd.Env, a21ReadyAfterOpenEnv+"=1")
		}
		delay := time.Duration(100+rand.IntN(600)) * time.Millisecond
		switch {
		case cut < 5:
			delay = time.Duration(cut*150+rand.IntN(100)) * time.Millisecond
		case cut == 5:
			delay = 4 * time.Second
		}
		lines, _, err := m.RunAndCut(cmd, delay, lossyfs.CutOptions{Torn: rand.IntN(2) == 0})
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		ceil := append([]int(nil), floor...)
		for _, line := range lines {
			f := strings.Fields(line)
			if len(f) == 0 || f[0] != "ack" {
				continue
			}
			i, err1 := strconv.Atoi(f[1])
			v, err2 := strconv.Atoi(f[2])
			if len(f) != 3 || err1 != nil || err2 != nil || i >= a21Main {
				t.Fatalf("cut %d: bad ack %q", cut, line)
			}
			floor[i] = max(floor[i], v)
			acks++
		}
		if cut > 5 && len(lines) > 0 {
			amongPuts++
		}
		for i := range a21Main {
			ceil[i] = min(ds[i].maxV, max(ceil[i], floor[i])+1) // one Put may be durable, not acked
		}
		local := filepath.Join(t.TempDir(), "leases.db")
		if err := copyStoreOut(m, local); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if schema, err := a21Schema(local); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		} else if schema == "1" {
			beforeMove++ // the cut came before the move committed
		}
		st, err := Open(local, Options{})
		if err != nil {
			t.Fatalf("cut %d (after %v): open: %v", cut, delay, err)
		}
		got, err := a21CheckAll(ctx, st, ds, floor, ceil)
		if err == nil && st.epoch != 5 {
			err = fmt.Errorf("epoch %d, the file's is 5", st.epoch)
		}
		st.Close()
		if err != nil {
			t.Fatalf("cut %d (after %v): %v", cut, delay, err)
		}
		floor = got
	}
	t.Logf("%d cuts (%d before the move committed, %d after acknowledged puts), %d acknowledged puts", cuts, beforeMove, amongPuts, acks)
	if beforeMove == 0 || amongPuts == 0 {
		t.Fatalf("the cuts missed: %d before the move committed, %d of %d after acknowledged puts", beforeMove, amongPuts, cuts-6)
	}
}

// a21Schema returns the schema stored in the closed store file at path.
func a21Schema(path string) (string, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return "", err
	}
	defer db.Close()
	var schema string
	err = db.View(func(tx *bolt.Tx) error {
		schema = string(tx.Bucket(bucketMeta).Get(keySchema))
		return nil
	})
	return schema, err
}
