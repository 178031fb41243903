package agent

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/protocol"
)

// statePub records the device states published.
type statePub struct {
	mu     sync.Mutex
	states []protocol.DeviceState
}

func (p *statePub) publish(_ string, payload []byte, _ bool) {
	var s protocol.DeviceState
	if json.Unmarshal(payload, &s) == nil {
		p.mu.Lock()
		p.states = append(p.states, s)
		p.mu.Unlock()
	}
}

// last returns the number of states published and the seq of the last.
func (p *statePub) last() (int, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.states) == 0 || p.states[len(p.states)-1].Fence == nil {
		return len(p.states), 0
	}
	return len(p.states), p.states[len(p.states)-1].Fence.Seq
}

func stateDomain(every time.Duration) (*domain, *statePub) {
	pub := &statePub{}
	dm := &domain{name: "plant", m: newMetrics(), annEvery: every}
	dm.devices = []*device{{id: "pump1", domain: "plant", dom: dm, available: true, env: &env{pub: pub}}}
	return dm, pub
}

// holds: raises under one lease within the interval are announced once,
// at its end, with the newest fence; a new holder is announced at once.
func TestStateAnnouncedOnLeaseChangeRateLimitedWithin(t *testing.T) {
	dm, pub := stateDomain(time.Hour)
	dm.raised(fenceToken("plant", 1, "A"))
	if n, seq := pub.last(); n != 1 || seq != 1 {
		t.Fatalf("first raise: %d states, last seq %d; want 1 state at seq 1", n, seq)
	}
	dm.raised(fenceToken("plant", 2, "A"))
	dm.raised(fenceToken("plant", 3, "A"))
	if n, _ := pub.last(); n != 1 {
		t.Fatalf("raises under the same lease within the interval: %d states, want still 1", n)
	}
	dm.raised(fenceToken("plant", 4, "B"))
	if n, seq := pub.last(); n != 2 || seq != 4 {
		t.Fatalf("new holder: %d states, last seq %d; want 2 states, the last at seq 4", n, seq)
	}
	dm.raised(fenceToken("plant", 5, "B"))
	dm.flushAnnouncement()
	if n, seq := pub.last(); n != 3 || seq != 5 {
		t.Fatalf("after the flush: %d states, last seq %d; want 3 states, the last at seq 5", n, seq)
	}
}

// holds: the trailing announcement comes by itself and carries the newest
// fence, however many raises the burst held.
func TestStateTrailingAnnouncementCatchesUp(t *testing.T) {
	dm, pub := stateDomain(20 * time.Millisecond)
	for seq := uint64(1); seq <= 50; seq++ {
		dm.raised(fenceToken("plant", seq, "A"))
	}
	waitFor(t, "the state at seq 50", func() bool { _, seq := pub.last(); return seq == 50 })
	if n, _ := pub.last(); n >= 50 {
		t.Fatalf("%d states for 50 raises under one lease, want fewer", n)
	}
}
