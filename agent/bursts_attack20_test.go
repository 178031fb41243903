package agent

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/protocol"
)

// workerGoroutines counts the goroutines running a device's decide or
// apply worker, from a dump of every goroutine's stack.
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
	return strings.Count(string(buf), "agent.(*device).decideWorker(") + strings.Count(string(buf), "agent.(*device).applyWorker(")
}

// settledWorkerGoroutines is workerGoroutines once it is 0, or after 50 ms:
// a worker that returned may still be leaving its frame; one that is there
// 50 ms later did not end.
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

// burstPause is the pause between bursts: long enough for every device's
// queues to drain and their workers to end, so each burst starts them again.
const burstPause = 250 * time.Millisecond

// Real agent: bursts to several devices, separated by pauses around
// burstPause (so each burst's first command races its workers' end or
// starts them anew): every command is answered applied and each
// device applied its commands exactly once in publish (accept) order. A
// stop then leaves no worker goroutine.
func TestAttack20AgentBurstsAcrossWorkerEndsInAcceptOrder(t *testing.T) {
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
		time.Sleep(burstPause - 15*time.Millisecond + time.Duration(rng.Int64N(int64(30*time.Millisecond))))
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
