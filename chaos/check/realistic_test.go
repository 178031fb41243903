package check

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/devices/sim"
)

// schedule builds a clean, realistic history: supervisors sup1–sup3 hand
// domain d1 (devices fw1, fw2) over to each other — by release, or by a
// stall that loses the lease, after which the woken holder's command is
// refused as stale — while sup4 holds d2 (fw3) throughout. Agents are
// killed around idempotent commands (in_doubt, applied twice), the
// controller restarts (new epoch), acquires go unanswered in partitions;
// at the end every lease is released and the probe gets everything.
type schedule struct {
	in    Input
	t     int // now, ms
	epoch uint64
	seq   uint64
	ids   int
	d2    history.Op // sup4's grant of d2
}

// newSchedule starts a schedule with sup4 holding d2.
func newSchedule() *schedule {
	s := &schedule{epoch: 1, in: Input{
		Domains:       map[string]string{"fw1": "d1", "fw2": "d1", "fw3": "d2"},
		DoubtFaults:   doubtKinds,
		ProgressBound: time.Second,
	}}
	s.d2 = grant("sup4", "d2", 1, 1, 0, 1)
	s.op(s.d2)
	s.t = 2
	return s
}

// op records an op; fault a fault; entry an apply entry.
func (s *schedule) op(o history.Op)       { s.in.Ops = append(s.in.Ops, o) }
func (s *schedule) fault(f history.Fault) { s.in.Faults = append(s.in.Faults, f) }
func (s *schedule) entry(e sim.Entry)     { s.in.Applies = append(s.in.Applies, e) }

// id is a fresh command id.
func (s *schedule) id() string { s.ids++; return fmt.Sprintf("c%d", s.ids) }

// command sends one command by proc with lease epoch.seq of domain to
// device, answered ok and applied once.
func (s *schedule) command(proc, device, domain string, epoch, seq uint64) {
	id := s.id()
	s.op(command(proc, device, id, domain, epoch, seq, "ok", s.t, s.t+3))
	s.entry(apply(device, id, domain, proc, epoch, seq, s.t+1, s.t+2))
	s.t += 4
}

// inDoubt sends an idempotent command that the agent's crash leaves in
// doubt: applied before the kill, answered in_doubt, retried, applied
// again.
func (s *schedule) inDoubt(proc, device string) {
	id := s.id()
	s.op(idem(command(proc, device, id, "d1", s.epoch, s.seq, "in_doubt", s.t, s.t+5)))
	s.entry(idemEntry(apply(device, id, "d1", proc, s.epoch, s.seq, s.t, s.t)))
	s.fault(fault("kill-agent", "agent1", s.t+1, s.t+1))
	s.op(idem(command(proc, device, id, "d1", s.epoch, s.seq, "ok", s.t+6, s.t+8)))
	s.entry(idemEntry(apply(device, id, "d1", proc, s.epoch, s.seq, s.t+7, s.t+7)))
	s.t += 9
}

// round is one tenure of d1: holder polls, others are refused, the holder
// is granted, commands, and leaves by release (even rounds) or by losing
// the lease in a stall (odd rounds).
func (s *schedule) round(r, commands int) {
	sups := []string{"sup1", "sup2", "sup3"}
	holder, waiter := sups[r%3], sups[(r+1)%3]
	if r%7 == 6 {
		s.fault(fault("kill", "controller", s.t, s.t+2))
		s.epoch++
		s.t += 3
	}
	if r%4 == 1 {
		s.fault(fault("partition", waiter, s.t, s.t+3))
		s.op(acquire(waiter, "d1", "", 0, 0, s.t, -1))
		s.t += 4
	}
	s.seq++
	s.op(grant(holder, "d1", s.epoch, s.seq, s.t, s.t+2))
	s.t += 3
	for i := range commands {
		s.command(holder, []string{"fw1", "fw2"}[i%2], "d1", s.epoch, s.seq)
		if i == 1 {
			s.op(acquire(waiter, "d1", "held", 0, 0, s.t, s.t+1))
			s.t += 2
		}
	}
	if r%5 == 3 {
		s.inDoubt(holder, "fw2")
	}
	if r%10 == 0 {
		s.command("sup4", "fw3", "d2", 1, 1)
	}
	if r%2 == 0 {
		s.op(release(holder, "d1", "released", s.epoch, s.seq, s.t, s.t+1, s.t+50))
		s.t += 2
		return
	}
	// A stall: the lease runs out at t+10; the next grant ends after that;
	// the holder wakes, learns it lost the lease and is refused.
	s.fault(fault("stall", holder, s.t, s.t+12))
	s.op(event(history.Lost, holder, "d1", s.epoch, s.seq, s.t+12, s.t+10))
	stale := idem(command(holder, "fw1", s.id(), "d1", s.epoch, s.seq, "stale_token", s.t+13, s.t+14))
	stale.Stale = true
	s.op(stale)
	s.t += 11
}

// finish releases d2, heals and runs the probe.
func (s *schedule) finish() Input {
	s.op(release("sup4", "d2", "released", 1, 1, s.t, s.t+1, s.t+50))
	s.t += 20
	s.in.Healed = ms(s.t)
	s.seq++
	s.op(grant(ProbeProc, "d1", s.epoch, s.seq, s.t+1, s.t+2))
	s.t += 3
	s.command(ProbeProc, "fw1", "d1", s.epoch, s.seq)
	s.command(ProbeProc, "fw2", "d1", s.epoch, s.seq)
	s.op(grant(ProbeProc, "d2", 1, 2, s.t, s.t+1))
	s.t += 2
	s.command(ProbeProc, "fw3", "d2", 1, 2)
	s.op(event(history.Held, ProbeProc, "d1", s.epoch, s.seq, s.t, s.t+100))
	return s.in
}

// realistic builds a schedule of rounds tenures with commands each.
func realistic(rounds, commands int) Input {
	s := newSchedule()
	for r := range rounds {
		s.round(r, commands)
	}
	return s.finish()
}

// A realistic clean history passes every rule.
func TestRealisticCleanHistoryPasses(t *testing.T) {
	in := realistic(12, 6)
	r := Check(in)
	wantClean(t, r)
	if r.Progress <= 0 || r.Progress > in.ProgressBound {
		t.Errorf("Progress = %v", r.Progress)
	}
	st := r.Stats
	if st.Faults["kill-agent"] == 0 || st.Faults["stall"] == 0 || st.Codes["in_doubt"] == 0 || st.Codes["stale_token"] == 0 ||
		st.LeaseCodes[NoAnswer] == 0 || st.LeaseCodes["held"] == 0 {
		t.Errorf("the history lacks a case it should cover: %+v", st)
	}
}

// The same history with one stale apply slipped in fails exactly there:
// the checker is not blind to a realistic history's noise.
func TestRealisticHistoryWithStaleApplyFails(t *testing.T) {
	in := realistic(12, 6)
	last := in.Applies[len(in.Applies)-1]
	stale := apply("fw2", "late", "d1", "sup1", 1, 1, 0, 0)
	stale.Started, stale.At = last.At.Add(time.Millisecond), last.At.Add(2*time.Millisecond)
	in.Applies = append(in.Applies, stale)
	r := Check(in)
	wantViolation(t, r, I2, "stale apply", `id "late"`)
	wantViolation(t, r, I2, "token went backwards", `id "late"`)
	for _, v := range r.Violations {
		if v.Invariant != I2 || !containsAll(v.Message, []string{`id "late"`}) {
			t.Errorf("violation not about the slipped-in entry: %s", v)
		}
	}
}

// A history of about 20k ops and entries is checked whole: clean it
// passes, and a stale apply and a lost acknowledgement in the middle are
// found, each exactly once.
func TestLargeHistory(t *testing.T) {
	in := realistic(1500, 12)
	if len(in.Ops) < 20000 || len(in.Applies) < 18000 {
		t.Fatalf("only %d ops, %d entries", len(in.Ops), len(in.Applies))
	}
	wantClean(t, Check(in))

	mid := in.Applies[len(in.Applies)/2]
	stale := mid
	stale.ID, stale.Seq = "late", mid.Seq-1
	stale.Started, stale.At = mid.At.Add(time.Microsecond), mid.At.Add(2*time.Microsecond)
	in.Applies = slices.Insert(slices.Clone(in.Applies), len(in.Applies)/2+1, stale)
	in.Ops = append(slices.Clone(in.Ops), command("sup1", "fw1", "gone", "d1", 1, 1, "ok", 1, 2))
	r := Check(in)
	if n := count(r, I4); n != 1 {
		t.Errorf("%d I4 violations, want 1", n)
	}
	wantViolation(t, r, I4, `never applied id "gone"`)
	wantViolation(t, r, I2, "stale apply", `id "late"`)
	for _, v := range r.Violations {
		if v.Invariant == I2 && !containsAll(v.Message, []string{`id "late"`}) {
			t.Errorf("I2 violation not about the slipped-in entry: %s", v)
		}
	}
}

// Check is deterministic: the same input gives the same report.
func TestCheckDeterministic(t *testing.T) {
	in := realistic(6, 4)
	in.Applies = append(in.Applies, apply("fw1", "x", "d1", "sup1", 1, 1, 100000, 100001),
		apply("fw2", "x", "d1", "sup1", 1, 1, 100002, 100003))
	in.Ops = append(in.Ops, command("sup1", "fw3", "y", "d2", 1, 1, "ok", 5, 6))
	a, b := Check(in), Check(in)
	if len(a.Violations) == 0 || !slices.Equal(a.Violations, b.Violations) {
		t.Fatalf("reports differ or are empty:\n%v\n%v", a.Violations, b.Violations)
	}
	if !slices.IsSortedFunc(a.Violations, func(x, y Violation) int {
		return cmp.Or(cmp.Compare(x.Invariant, y.Invariant), cmp.Compare(x.Message, y.Message))
	}) {
		t.Error("violations are not sorted")
	}
}
