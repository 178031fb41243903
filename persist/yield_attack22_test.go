package persist

// Store-level attack tests of commit 3b125e6 (the group-commit writer yields
// up to 4 times while its queue grows before it collects a batch): I2 (no
// stale token accepted once a newer one is durably accepted), I3/I4 (an
// acknowledged accept survives a crash or a power cut; a retry is a
// duplicate, never a second accept) under racing supervisors, grants,
// Close and one processor.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/lossyfs"
	"github.com/fencegate/fencegate/internal/proctest"
)

// attack22Max raises m to at least v.
func attack22Max(m *atomic.Uint64, v uint64) {
	for {
		cur := m.Load()
		if v <= cur || m.CompareAndSwap(cur, v) {
			return
		}
	}
}

// TestAttack22NoStaleAcceptAfterNewerAcked (I2): supervisors with tokens
// old and new race on several devices of one domain while grants are
// raised and the writer yields. Once Accept or Raise has returned with
// token T accepted, no Accept that starts afterwards may accept a token
// below T, and DomainFence already shows at least T. After a crash every
// accepted command is journaled and the domain fence is the highest
// accepted token; a retry of an accepted command is a duplicate.
func TestAttack22NoStaleAcceptAfterNewerAcked(t *testing.T) {
	proctest.AtProcs(t, func(t *testing.T) {
		s := mustOpen(t, Options{MaxRecords: 1 << 30, MaxAge: 1 << 62})
		sg := testSigner(t)
		const maxSeq = 120
		toks := make([]fence.Token, maxSeq+1)
		for i := 1; i <= maxSeq; i++ {
			toks[i] = mustToken(t, sg, "dom", 1, uint64(i), "h")
		}
		var high atomic.Uint64 // highest token acknowledged as accepted
		var violations atomic.Int64
		var first atomic.Value
		violate := func(msg string) {
			if violations.Add(1) == 1 {
				first.Store(msg)
			}
		}
		type acc struct {
			cmd Command
			seq uint64
		}
		var accMu sync.Mutex
		var accepted []acc
		const supervisors, each = 12, 30 // 360 commands + grants: below one checkpoint
		var wg sync.WaitGroup
		for g := range supervisors {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 22))
				for i := range each {
					floor := high.Load()
					seq := max(1, min(maxSeq, int(floor)-4+r.IntN(8)))
					cmd := Command{Device: fmt.Sprintf("dev%d", r.IntN(6)), ID: fmt.Sprintf("s%02d-%03d", g, i), Token: toks[seq], Op: "set", Args: []byte(`{"v":1}`)}
					d, err := s.Accept(ctxT(t), cmd)
					if err != nil {
						violate(fmt.Sprintf("Accept %s: %v", cmd.ID, err))
						return
					}
					switch d.Outcome {
					case Accepted:
						if uint64(seq) < floor {
							violate(fmt.Sprintf("I2: %s with seq %d accepted after seq %d was acknowledged", cmd.ID, seq, floor))
						}
						attack22Max(&high, uint64(seq))
						if f, err := s.DomainFence("dom"); err != nil || f.Seq < uint64(seq) {
							violate(fmt.Sprintf("DomainFence after %s accepted at %d: %v, %v", cmd.ID, seq, f, err))
						}
						accMu.Lock()
						accepted = append(accepted, acc{cmd, uint64(seq)})
						accMu.Unlock()
					case Stale:
					default:
						violate(fmt.Sprintf("%s: outcome %v", cmd.ID, d.Outcome))
					}
				}
			})
		}
		wg.Go(func() { // grants announced meanwhile
			r := rand.New(rand.NewPCG(99, 22))
			for range 40 {
				floor := high.Load()
				seq := max(1, min(maxSeq, int(floor)-2+r.IntN(6)))
				d, err := s.Raise(ctxT(t), toks[seq])
				if err != nil {
					violate(fmt.Sprintf("Raise %d: %v", seq, err))
					return
				}
				if d.Outcome == Accepted {
					if uint64(seq) < floor {
						violate(fmt.Sprintf("I2: grant %d accepted after %d was acknowledged", seq, floor))
					}
					attack22Max(&high, uint64(seq))
				}
			}
		})
		proctest.Wait(t, &wg, "supervisors")
		if n := violations.Load(); n > 0 {
			t.Fatalf("%d violations; first: %v", n, first.Load())
		}
		if len(accepted) == 0 {
			t.Fatal("nothing accepted: the attack did not run")
		}
		cp := walCrashCopy(t, s.Path(), t.TempDir()) // quiescent or before the first checkpoint: the two files are of one moment
		r := mustOpenPath(t, cp, Options{MaxRecords: 1 << 30, MaxAge: 1 << 62})
		f, err := r.DomainFence("dom")
		if err != nil || f.Seq != high.Load() {
			t.Fatalf("after a crash the domain fence is %v (%v), want seq %d", f, err, high.Load())
		}
		for _, a := range accepted {
			if rec, ok, err := r.Lookup(a.cmd.Device, a.cmd.ID); err != nil || !ok {
				t.Fatalf("after a crash accepted %s/%s is not journaled (%v, %v)", a.cmd.Device, a.cmd.ID, rec, err)
			}
			d, err := r.Accept(ctxT(t), a.cmd)
			if err != nil || d.Outcome != Duplicate {
				t.Fatalf("retry of accepted %s after a crash: %v, %v; want duplicate", a.cmd.ID, d.Outcome, err)
			}
		}
		if high.Load() > 1 {
			stale := Command{Device: "dev0", ID: "late-stale", Token: toks[high.Load()-1], Op: "set"}
			if d := mustAccept(t, r, stale); d.Outcome != Stale {
				t.Fatalf("after a crash a token below the fence got %v, want stale", d.Outcome)
			}
		}
	})
}

// TestAttack22CloseRacesAccepts (I4): Close comes while accepts are queued
// and the writer yields. Every Accept returns; an Accepted one is journaled
// after reopen and its retry is a duplicate (not applied twice); a refused
// one (ErrClosed) left nothing and is accepted fresh on retry.
func TestAttack22CloseRacesAccepts(t *testing.T) {
	proctest.AtProcs(t, func(t *testing.T) {
		sg := testSigner(t)
		tok := mustToken(t, sg, "dom", 1, 1, "h")
		for round := range 6 {
			path := filepath.Join(t.TempDir(), "fence.db")
			s, err := Open(path, Options{MaxRecords: 1 << 30, MaxAge: 1 << 62})
			if err != nil {
				t.Fatal(err)
			}
			type res struct {
				cmd Command
				out Outcome
				err error
			}
			var mu sync.Mutex
			var results []res
			var acked atomic.Int64
			var wg sync.WaitGroup
			for g := range 16 {
				wg.Go(func() {
					for i := range 25 {
						cmd := Command{Device: fmt.Sprintf("dev%d", g%5), ID: fmt.Sprintf("r%d-%02d-%02d", round, g, i), Token: tok, Op: "set"}
						d, err := s.Accept(ctxT(t), cmd)
						mu.Lock()
						results = append(results, res{cmd, d.Outcome, err})
						mu.Unlock()
						if err != nil {
							return
						}
						acked.Add(1)
					}
				})
			}
			var closeErr error
			wg.Go(func() {
				for acked.Load() < int64(5+round*60) {
					runtime.Gosched()
				}
				closeErr = s.Close()
			})
			proctest.Wait(t, &wg, "accepts racing Close")
			if closeErr != nil {
				t.Fatalf("round %d: Close: %v", round, closeErr)
			}
			r := mustOpenPath(t, path, Options{MaxRecords: 1 << 30, MaxAge: 1 << 62})
			for _, x := range results {
				_, ok, err := r.Lookup(x.cmd.Device, x.cmd.ID)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case x.err == nil && x.out == Accepted:
					if !ok {
						t.Fatalf("round %d: %s accepted before Close but lost", round, x.cmd.ID)
					}
					if d := mustAccept(t, r, x.cmd); d.Outcome != Duplicate {
						t.Fatalf("round %d: retry of accepted %s: %v, want duplicate", round, x.cmd.ID, d.Outcome)
					}
				case errors.Is(x.err, ErrClosed):
					if ok {
						t.Fatalf("round %d: %s refused with ErrClosed but journaled", round, x.cmd.ID)
					}
					if d := mustAccept(t, r, x.cmd); d.Outcome != Accepted {
						t.Fatalf("round %d: retry of refused %s: %v, want accepted", round, x.cmd.ID, d.Outcome)
					}
				default:
					t.Fatalf("round %d: %s: %v, %v; want accepted or ErrClosed", round, x.cmd.ID, x.out, x.err)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestAttack22PowerCutOneProcessor (I3, I4, I2 after a power cut): the
// power-cut loop (a child process accepting, completing and raising on
// every device, cut at a random moment with every write not fsynced
// dropped or torn) with the child on one processor and on two, where the
// writer's yields hand the processor to the submitters most often. Every
// acknowledged accept must survive with its state, every domain fence
// must be at least every acknowledged token, no id accepted fresh twice.
func TestAttack22PowerCutOneProcessor(t *testing.T) {
	for _, procs := range []string{"1", "2"} {
		t.Run("GOMAXPROCS="+procs, func(t *testing.T) {
			m := lossyfs.MustMount(t) // a store, and a model, of its own
			model, stats, err := powerCutLoop(t, m, 15, false, "GOMAXPROCS="+procs)
			if err != nil {
				t.Fatalf("GOMAXPROCS=%s: %v (%s)", procs, err, stats)
			}
			if stats.acks == 0 {
				t.Fatalf("no acknowledgements in %d cuts: the attack did not run", stats.cuts)
			}
			t.Logf("GOMAXPROCS=%s: %s; %d accepted", procs, stats, len(model.accepted))
		})
	}
}
