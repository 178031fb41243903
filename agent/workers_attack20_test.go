package agent

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/protocol"
)

// workerGoroutines counts the goroutines inside (*workers).run, running a
// task or idle, from a dump of every goroutine's stack.
func workerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Count(string(buf), "agent.(*workers).run(")
}

// settledWorkerGoroutines is workerGoroutines once it is 0, or after 50 ms:
// a goroutine that stop saw end (alive.Done ran) may still be leaving run;
// one that is there 50 ms later was not ended.
func settledWorkerGoroutines() int {
	deadline := time.Now().Add(50 * time.Millisecond)
	for {
		n := workerGoroutines()
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}

// waitTimeout runs w.Wait and fails the test if it has not returned in d.
func waitTimeout(t *testing.T, what string, w *workers, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { w.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: Wait did not return in %v: a task was lost or is stuck", what, d)
	}
}

// spin waits about d without sleeping (sleep granularity would miss the
// edge of a microsecond idle timeout).
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// A task handed over just as the idle goroutine's timer fires (or stop is
// near) is neither lost nor run twice: the handoff races the idle timeout
// at every gap around idleFor, from several submitters at once.
func TestAttack20WorkersNoTaskLostAtIdleEdge(t *testing.T) {
	for _, idle := range []time.Duration{time.Microsecond, 20 * time.Microsecond, 100 * time.Microsecond, time.Millisecond} {
		w := newWorkers(idle)
		const submitters, each = 4, 1500
		runs := make([]atomic.Int32, submitters*each)
		var wg sync.WaitGroup
		for s := range submitters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(s), uint64(idle)))
				for i := range each {
					k := s*each + i
					w.Go(func() { runs[k].Add(1) })
					spin(time.Duration(rng.Int64N(int64(2*idle) + 1)))
				}
			}()
		}
		wg.Wait()
		waitTimeout(t, fmt.Sprintf("idleFor %v", idle), w, 10*time.Second)
		for k := range runs {
			if n := runs[k].Load(); n != 1 {
				t.Fatalf("idleFor %v: task %d ran %d times after Wait, want 1", idle, k, n)
			}
		}
		w.stop()
		if n := settledWorkerGoroutines(); n != 0 {
			t.Fatalf("idleFor %v: %d worker goroutines after stop returned, want 0", idle, n)
		}
	}
}

// Wait covers tasks started by tasks (a queue spawns its worker from
// inside another worker: decide pushes into the apply queue): a chain and
// a tree of tasks, each calling Go just before it returns, are all done
// when Wait returns.
func TestAttack20WorkersWaitCoversTasksStartedByTasks(t *testing.T) {
	for _, idle := range []time.Duration{time.Microsecond, time.Millisecond, time.Minute} {
		w := newWorkers(idle)
		for round := range 50 {
			var done atomic.Int64
			var chain func(n int)
			chain = func(n int) {
				if n > 0 {
					w.Go(func() { chain(n - 1) })
				}
				runtime.Gosched()
				done.Add(1)
			}
			var tree func(depth int)
			tree = func(depth int) {
				if depth > 0 {
					w.Go(func() { tree(depth - 1) })
					w.Go(func() { tree(depth - 1) })
				}
				done.Add(1)
			}
			w.Go(func() { chain(200) })
			w.Go(func() { tree(7) })
			waitTimeout(t, fmt.Sprintf("idleFor %v round %d", idle, round), w, 10*time.Second)
			if got, want := done.Load(), int64(201+255); got != want {
				t.Fatalf("idleFor %v round %d: Wait returned with %d of %d tasks done", idle, round, got, want)
			}
		}
		w.stop()
	}
	if n := settledWorkerGoroutines(); n != 0 {
		t.Fatalf("%d worker goroutines after stop, want 0", n)
	}
}

// stop, after Wait, returns only once every goroutine of the pool has
// ended, however many went idle at once; the agent's stop leaks none.
func TestAttack20WorkersStopEndsEveryGoroutine(t *testing.T) {
	w := newWorkers(time.Hour)
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(64)
	for range 64 {
		w.Go(func() { started.Done(); <-release })
	}
	started.Wait()
	n := workerGoroutines()
	close(release)
	if n != 64 {
		t.Fatalf("%d worker goroutines for 64 blocked tasks", n)
	}
	w.Wait()
	w.stop()
	if n := settledWorkerGoroutines(); n != 0 {
		t.Fatalf("%d worker goroutines right after stop returned, want 0", n)
	}
	w.stop() // a second stop is harmless
}

// Many queues over one shared pool, with an idle timeout at the scale of
// the gaps between pushes: each queue has at most one worker at a time
// and hands its items over in push order, every item exactly once.
func TestAttack20QueueOverSharedWorkersOneAtATimeInOrder(t *testing.T) {
	for _, idle := range []time.Duration{time.Microsecond, 50 * time.Microsecond, time.Second} {
		w := newWorkers(idle)
		const queues, producers, each = 16, 3, 400
		type item struct{ producer, n int }
		type qstate struct {
			q      *queue[item]
			inside atomic.Int32
			last   [producers]int
			got    int
			bad    atomic.Value
		}
		qs := make([]*qstate, queues)
		for i := range qs {
			s := &qstate{}
			for p := range s.last {
				s.last[p] = -1
			}
			s.q = newQueue[item](8, func() {
				w.Go(func() {
					if n := s.inside.Add(1); n != 1 {
						s.bad.Store(fmt.Sprintf("queue %d: %d workers at once", i, n))
					}
					defer s.inside.Add(-1)
					for {
						it, ok := s.q.next()
						if !ok {
							return
						}
						if it.n != s.last[it.producer]+1 {
							s.bad.Store(fmt.Sprintf("queue %d: producer %d item %d after %d", i, it.producer, it.n, s.last[it.producer]))
						}
						s.last[it.producer] = it.n
						s.got++
						if it.n%7 == 0 {
							runtime.Gosched()
						}
					}
				})
			})
			qs[i] = s
		}
		var wg sync.WaitGroup
		for i, s := range qs {
			for p := range producers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(i), uint64(p)))
					for n := range each {
						if !s.q.push(item{p, n}) {
							panic("push into an open queue refused")
						}
						if rng.IntN(4) == 0 {
							spin(time.Duration(rng.Int64N(int64(min(2*idle, 200*time.Microsecond)) + 1)))
						}
					}
				}()
			}
		}
		wg.Wait()
		for _, s := range qs {
			s.q.close()
		}
		waitTimeout(t, fmt.Sprintf("idleFor %v", idle), w, 10*time.Second)
		w.stop()
		for i, s := range qs {
			if b := s.bad.Load(); b != nil {
				t.Fatalf("idleFor %v: %s", idle, b)
			}
			if s.got != producers*each || s.q.len() != 0 {
				t.Fatalf("idleFor %v: queue %d handed over %d of %d items (%d left)", idle, i, s.got, producers*each, s.q.len())
			}
		}
	}
}

// The agent's two stages over two pools, drained as drainWorkers drains
// them while producers still push: everything the inbox took is applied
// exactly once, in order, one apply at a time per device, and nothing is
// applied once the drain returned (the store is closed then).
func TestAttack20PipelineDrainLikeAgent(t *testing.T) {
	for round := range 30 {
		idle := []time.Duration{time.Microsecond, 30 * time.Microsecond, 250 * time.Millisecond}[round%3]
		deciders, appliers := newWorkers(idle), newWorkers(idle)
		var storeClosed atomic.Bool
		var late atomic.Int64
		const devs = 8
		type dev struct {
			inbox   *queue[int]
			applyQ  *queue[int]
			taken   []int // accepted by the inbox, in push order (one producer)
			applied []int
			inside  atomic.Int32
			overlap atomic.Bool
		}
		ds := make([]*dev, devs)
		for i := range ds {
			d := &dev{}
			d.inbox = newQueue[int](4, func() {
				deciders.Go(func() {
					for {
						v, ok := d.inbox.next()
						if !ok {
							return
						}
						if storeClosed.Load() {
							late.Add(1)
						}
						d.applyQ.push(v)
					}
				})
			})
			d.applyQ = newQueue[int](4, func() {
				appliers.Go(func() {
					if d.inside.Add(1) != 1 {
						d.overlap.Store(true)
					}
					defer d.inside.Add(-1)
					for {
						v, ok := d.applyQ.next()
						if !ok {
							return
						}
						if v%5 == 0 {
							time.Sleep(20 * time.Microsecond)
						}
						if storeClosed.Load() {
							late.Add(1)
						}
						d.applied = append(d.applied, v)
					}
				})
			})
			ds[i] = d
		}
		stopProducers := make(chan struct{})
		var wg sync.WaitGroup
		for i, d := range ds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(i)))
				for n := 0; ; n++ {
					select {
					case <-stopProducers:
						return
					default:
					}
					switch d.inbox.tryPush(n) {
					case pushed:
						d.taken = append(d.taken, n)
					case closedOut:
						return
					}
					if rng.IntN(3) == 0 {
						spin(time.Duration(rng.Int64N(int64(min(2*idle, 200*time.Microsecond)) + 1)))
					}
				}
			}()
		}
		time.Sleep(time.Duration(5+round) * time.Millisecond)
		// drainWorkers, while the producers run on
		drained := make(chan struct{})
		go func() {
			for _, d := range ds {
				d.inbox.close()
			}
			deciders.Wait()
			for _, d := range ds {
				d.applyQ.close()
			}
			appliers.Wait()
			deciders.stop()
			appliers.stop()
			storeClosed.Store(true)
			close(drained)
		}()
		select {
		case <-drained:
		case <-time.After(15 * time.Second):
			t.Fatalf("round %d: drain did not return", round)
		}
		close(stopProducers)
		wg.Wait()
		if n := late.Load(); n != 0 {
			t.Fatalf("round %d: %d decides/applies after the drain returned", round, n)
		}
		for i, d := range ds {
			if d.overlap.Load() {
				t.Fatalf("round %d: device %d had two apply workers at once", round, i)
			}
			if fmt.Sprint(d.applied) != fmt.Sprint(d.taken) {
				t.Fatalf("round %d: device %d took %d commands and applied %d, or out of order", round, i, len(d.taken), len(d.applied))
			}
		}
		if n := settledWorkerGoroutines(); n != 0 {
			t.Fatalf("round %d: %d worker goroutines after the drain", round, n)
		}
	}
}

// Real agent: bursts to several devices, separated by pauses at the
// agents' 250 ms idle timeout (so the next command's handoff races the
// idle goroutine's end): every command is answered applied and each
// device applied its commands exactly once in publish (accept) order. A
// stop then leaves no worker goroutine.
func TestAttack20AgentBurstsAcrossIdleTimeoutInAcceptOrder(t *testing.T) {
	h := newHarness(t)
	devs := []string{"d0", "d1", "d2", "d3"}
	for _, id := range devs {
		h.addDevice(t, id, id) // own domain: tokens of one device never fence another
	}
	h.start()
	rng := rand.New(rand.NewPCG(20, 20))
	// one token per device: a higher one accepted behind a waiting command
	// would (rightly) fence it at the recheck before the device
	tok := map[string]string{}
	for _, d := range devs {
		tok[d] = h.tokenIn(d, 1, "A")
	}
	var want = map[string][]string{}
	var ids []string
	for burst := range 8 {
		for i := range 6 {
			for _, d := range devs {
				id := fmt.Sprintf("%s-b%d-%d", d, burst, i)
				h.sup.Publish(t, d, set(id, tok[d], i))
				want[d] = append(want[d], id)
				ids = append(ids, id)
			}
		}
		time.Sleep(workerIdleFor - 15*time.Millisecond + time.Duration(rng.Int64N(int64(30*time.Millisecond))))
	}
	for _, id := range ids {
		wantResult(t, h.sup.Wait(t, id), protocol.StatusApplied, protocol.CodeOK)
	}
	for _, d := range devs {
		if got := appliedIDs(t, h, d); fmt.Sprint(got) != fmt.Sprint(want[d]) {
			t.Errorf("%s applied %v\nwant %v", d, got, want[d])
		}
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if n := settledWorkerGoroutines(); n != 0 {
		t.Fatalf("%d worker goroutines after the agent stopped", n)
	}
}

// Real agent stopped while an apply runs and more commands are accepted
// behind it: Run returns only after every accepted command was applied,
// journaled done and answered (I3/I4) — the store is not closed under a
// running apply — and no worker goroutine is left. Repeated across
// restarts of the agent on one store.
func TestAttack20AgentStopMidApplyFinishesAccepted(t *testing.T) {
	h := newHarness(t, "pump1", "pump2")
	var seq uint64
	for round := range 3 {
		h.start()
		var ids []string
		seq++
		tok := h.token(seq, "A")
		p := fmt.Sprintf("p%d", round)
		h.sup.Publish(t, "pump1", pulse(p, tok, 400))
		ids = append(ids, p)
		for i := range 5 {
			for _, d := range []string{"pump1", "pump2"} {
				id := fmt.Sprintf("%s-r%d-s%d", d, round, i)
				h.sup.Publish(t, d, set(id, tok, i))
				ids = append(ids, id)
			}
		}
		for _, d := range []string{"pump1", "pump2"} {
			last := fmt.Sprintf("%s-r%d-s4", d, round)
			waitFor(t, last+" accepted", func() bool {
				_, ok, err := h.agent.env.store.Lookup(d, last)
				return err == nil && ok
			})
		}
		stopped := make(chan error, 1)
		go func() { stopped <- h.stop() }()
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("agent did not stop")
		}
		if n := settledWorkerGoroutines(); n != 0 {
			t.Fatalf("round %d: %d worker goroutines after the agent stopped", round, n)
		}
		for _, id := range ids {
			wantResult(t, h.sup.Wait(t, id), protocol.StatusApplied, protocol.CodeOK)
		}
		st, err := persist.Open(filepath.Join(h.cfg.Agent.DataDir, "fence.db"), persist.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			dev := "pump1"
			if strings.HasPrefix(id, "pump2") {
				dev = "pump2"
			}
			r, ok, err := st.Lookup(dev, id)
			if err != nil || !ok || r.State != persist.StateDone {
				st.Close()
				t.Fatalf("round %d: %s/%s journaled %+v (found %v, %v) after stop, want done", round, dev, id, r, ok, err)
			}
		}
		st.Close()
		for _, d := range []string{"pump1", "pump2"} {
			var got []string
			for _, id := range appliedIDs(t, h, d) {
				if strings.Contains(id, fmt.Sprintf("r%d", round)) || id == p {
					got = append(got, id)
				}
			}
			var want []string
			for _, id := range ids {
				if strings.HasPrefix(id, d) || (d == "pump1" && id == p) {
					want = append(want, id)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("round %d: %s applied %v, want %v", round, d, got, want)
			}
		}
	}
}
