package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/protocol"
)

// atk15 is the shared state of the "test-attack15" driver: a sim device
// (no device-side fence, so only the agent's fence protects it) whose
// CheckCommand refuses everything while refuse is set, and whose Apply
// counts applies per id and can be stalled (a stuck device line).
var atk15 struct {
	refuse  atomic.Bool
	mu      sync.Mutex
	applies map[string]int
	gate    chan struct{} // non-nil: Apply waits for it to close
	entered chan string
	checks  map[string]int
}

func atk15Reset() {
	atk15.refuse.Store(false)
	atk15.mu.Lock()
	atk15.applies, atk15.checks, atk15.gate, atk15.entered = map[string]int{}, map[string]int{}, nil, make(chan string, 64)
	atk15.mu.Unlock()
}

func atk15Applies(id string) int {
	atk15.mu.Lock()
	defer atk15.mu.Unlock()
	return atk15.applies[id]
}

type atk15Driver struct{ *sim.Device }

func (d atk15Driver) CheckCommand(cmd devices.Command) error {
	atk15.mu.Lock()
	atk15.checks[cmd.ID]++
	atk15.mu.Unlock()
	if atk15.refuse.Load() {
		return devices.Errorf(protocol.CodeBadRequest, "attack15: the driver refuses every command now")
	}
	return nil
}

func (d atk15Driver) Apply(ctx context.Context, cmd devices.Command) (json.RawMessage, error) {
	atk15.mu.Lock()
	atk15.applies[cmd.ID]++
	gate, entered := atk15.gate, atk15.entered
	atk15.mu.Unlock()
	select {
	case entered <- cmd.ID:
	default:
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, devices.Errorf(protocol.CodeInDoubt, "attack15: stalled line, ctx done")
		}
	}
	return d.Device.Apply(ctx, cmd)
}

func init() {
	devices.Register("test-attack15", func(device string, s devices.Settings, log *slog.Logger) (devices.Driver, error) {
		d, err := sim.New(device, sim.Config{NoFence: true}, log)
		if err != nil {
			return nil, err
		}
		return atk15Driver{d}, nil
	})
}

func atk15Harness(t *testing.T) *harness {
	atk15Reset()
	t.Cleanup(atk15Reset)
	h := newHarness(t)
	h.cfg.Devices = append(h.cfg.Devices, DeviceConfig{ID: "v15", Domain: "plant", Driver: "test-attack15"})
	return h
}

// A retry of a command still in the driver (a stalled line), while the
// driver's check now refuses: the retry must wait for the command's own
// answer (duplicate) and the device must see the command once (I4); a
// fresh command is refused and never applied.
func TestAttack15RetryInFlightWhileCheckRefuses(t *testing.T) {
	h := atk15Harness(t)
	atk15.mu.Lock()
	gate := make(chan struct{})
	atk15.gate = gate
	entered := atk15.entered
	atk15.mu.Unlock()
	h.start()
	c1 := set("f1", h.token(3, "A"), 1)
	h.sup.Publish(t, "v15", c1)
	select {
	case id := <-entered:
		if id != "f1" {
			t.Fatalf("entered %q", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("f1 never reached the driver")
	}
	atk15.refuse.Store(true)
	h.sup.Publish(t, "v15", c1) // retry while f1 is in the driver
	fresh := set("f2", h.token(3, "A"), 2)
	h.sup.Publish(t, "v15", fresh)
	// The decide stage takes a device's commands in order: f2's refusal
	// means the retry of f1 was decided while f1 was still in the driver.
	wantResult(t, h.sup.Wait(t, "f2"), protocol.StatusRejected, protocol.CodeBadRequest)
	close(gate)
	r1 := h.sup.Wait(t, "f1")
	r1b := h.sup.Wait(t, "f1")
	for _, r := range []protocol.Result{r1, r1b} {
		wantResult(t, r, protocol.StatusApplied, protocol.CodeOK)
	}
	if r1.Duplicate == r1b.Duplicate {
		t.Fatalf("want one fresh and one duplicate answer: %+v / %+v", r1, r1b)
	}
	if n := atk15Applies("f1"); n != 1 {
		t.Fatalf("f1 applied %d times, want 1 (I4)", n)
	}
	if n := atk15Applies("f2"); n != 0 {
		t.Fatalf("refused f2 applied %d times", n)
	}
}

// A retry whose id is journaled but whose args differ (and the driver
// refuses them) must still be answered "id reused" — never applied, never
// replace the journaled record.
func TestAttack15ReusedIDDifferentArgsRefusedByCheck(t *testing.T) {
	h := atk15Harness(t)
	h.start()
	tok := h.token(3, "A")
	wantResult(t, h.sup.Send(t, "v15", set("r1", tok, 7)), protocol.StatusApplied, protocol.CodeOK)
	before, known, err := h.agent.env.store.Lookup("v15", "r1")
	if err != nil || !known {
		t.Fatalf("lookup: %v %v", known, err)
	}
	for _, refuse := range []bool{true, false} {
		atk15.refuse.Store(refuse)
		r := h.sup.Send(t, "v15", set("r1", tok, 8))
		wantResult(t, r, protocol.StatusRejected, protocol.CodeBadRequest)
		if !strings.Contains(r.Message, "id reused") {
			t.Fatalf("refuse=%v: reused id answered %q, want the id-reused answer", refuse, r.Message)
		}
		// and a newer token with the same id: also reused, not applied
		r = h.sup.Send(t, "v15", set("r1", h.token(4, "B"), 7))
		if r.Status == protocol.StatusApplied && !r.Duplicate {
			t.Fatalf("refuse=%v: same id, newer token applied afresh: %+v", refuse, r)
		}
	}
	after, _, _ := h.agent.env.store.Lookup("v15", "r1")
	if after.Digest != before.Digest || after.State != before.State || string(after.Args) != string(before.Args) {
		t.Fatalf("journaled record changed: %+v -> %+v", before, after)
	}
	if n := atk15Applies("r1"); n != 1 {
		t.Fatalf("r1 applied %d times, want 1", n)
	}
	// The journaled answer still comes back for the true retry.
	atk15.refuse.Store(true)
	r := h.sup.Send(t, "v15", set("r1", tok, 7))
	wantResult(t, r, protocol.StatusApplied, protocol.CodeOK)
	if !r.Duplicate {
		t.Fatalf("true retry not a duplicate: %+v", r)
	}
}

// An in-doubt command (accepted, agent stopped mid-apply) retried while the
// driver's check refuses must be answered in_doubt, not bad_request, and
// must not be applied; a fresh command is refused and not journaled.
func TestAttack15InDoubtRetryWhileCheckRefuses(t *testing.T) {
	h := atk15Harness(t)
	cmd := h.seedInDoubt("v15", "d1", "set", `{"value":5}`, 4, "A")
	h.start()
	for _, refuse := range []bool{true, false, true} {
		atk15.refuse.Store(refuse)
		r := h.sup.Send(t, "v15", cmd)
		wantResult(t, r, protocol.StatusInDoubt, protocol.CodeInDoubt)
		if !r.Duplicate {
			t.Fatalf("in-doubt retry not marked duplicate: %+v", r)
		}
	}
	if n := atk15Applies("d1"); n != 0 {
		t.Fatalf("in-doubt command applied %d times (I4)", n)
	}
	atk15.refuse.Store(true)
	wantResult(t, h.sup.Send(t, "v15", set("d2", h.token(4, "A"), 1)), protocol.StatusRejected, protocol.CodeBadRequest)
	if _, known, err := h.agent.env.store.Lookup("v15", "d2"); known || err != nil {
		t.Fatalf("refused command journaled (%v, %v)", known, err)
	}
}

// After the fence rose, a journaled command's retry gets its journaled
// answer whatever the check says, and a stale fresh command — whether the
// check refuses it or not — never enters the driver (I2), and does not
// raise or lower the fence.
func TestAttack15StaleCommandsAndRetriesAfterFenceRaise(t *testing.T) {
	h := atk15Harness(t)
	h.start()
	old := set("s1", h.token(3, "A"), 1)
	wantResult(t, h.sup.Send(t, "v15", old), protocol.StatusApplied, protocol.CodeOK)
	wantResult(t, h.sup.Send(t, "v15", set("s2", h.token(5, "B"), 2)), protocol.StatusApplied, protocol.CodeOK)
	for i, refuse := range []bool{true, false} {
		atk15.refuse.Store(refuse)
		r := h.sup.Send(t, "v15", old)
		wantResult(t, r, protocol.StatusApplied, protocol.CodeOK)
		if !r.Duplicate {
			t.Fatalf("refuse=%v: retry of journaled s1 answered afresh: %+v", refuse, r)
		}
		id := []string{"s3", "s4"}[i]
		r = h.sup.Send(t, "v15", set(id, h.token(4, "A"), 3))
		if r.Status == protocol.StatusApplied {
			t.Fatalf("refuse=%v: stale command applied: %+v", refuse, r)
		}
		if atk15Applies(id) != 0 {
			t.Fatalf("stale %s entered the driver (I2)", id)
		}
	}
	if n := atk15Applies("s1"); n != 1 {
		t.Fatalf("s1 applied %d times", n)
	}
	if seq := h.domainSeq("plant"); seq != 5 {
		t.Fatalf("fence at %d, want 5", seq)
	}
	// After a restart (journal read from the file), same answers.
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.start()
	atk15.refuse.Store(true)
	r := h.sup.Send(t, "v15", old)
	wantResult(t, r, protocol.StatusApplied, protocol.CodeOK)
	if !r.Duplicate || atk15Applies("s1") != 1 {
		t.Fatalf("after restart: %+v, applies %d", r, atk15Applies("s1"))
	}
}
