package check

import (
	"testing"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/devices/sim"
)

// lineFaultInput: sup1 sends c1 at d1@1.2 to fw1 at 10 ms; fw1 takes it at
// 60 ms; meanwhile d1@1.3 was applied on fw2 at 30 ms. faults decide
// whether the line may have held c1.
func lineFaultInput(faults ...history.Fault) Input {
	return Input{Domains: twoDevices, DoubtFaults: doubtKinds, LineFaults: []string{"stall", "unplug"}, Faults: faults,
		Ops: []history.Op{command("sup1", "fw1", "c1", "d1", 1, 2, "ok", 10, 62)},
		Applies: []sim.Entry{
			apply("fw2", "c2", "d1", "sup2", 1, 3, 25, 30),
			apply("fw1", "c1", "d1", "sup1", 1, 2, 60, 61),
		}}
}

// A stale entry is judged by when its command was sent if a stall of its
// device's line was in effect between the send and the device taking it:
// the driver wrote the frame before d1@1.3 was durable, the line held it.
func TestStallHeldCommandIsJudgedBySend(t *testing.T) {
	wantClean(t, Check(lineFaultInput(fault("stall", "fw1", 5, 55))))
}

// Without such a fault — or with one on another device, or one that ended
// before the send — the same entry is a stale apply.
func TestStaleApplyWithoutLineFaultFails(t *testing.T) {
	for name, faults := range map[string][]history.Fault{
		"no fault":       nil,
		"other device":   {fault("stall", "fw2", 5, 55)},
		"healed before":  {fault("stall", "fw1", 1, 5)},
		"not a line one": {fault("partition", "fw1", 5, 55)},
	} {
		t.Run(name, func(t *testing.T) {
			wantViolation(t, Check(lineFaultInput(faults...)), I2, "stale apply", `id "c1"`)
		})
	}
}

// A command answered in_doubt was given up by the driver: the device may
// take it later (a busy single-threaded firmware works through what it
// received), so it too is judged by when it was sent. The same entry with
// an ok answer is a stale apply.
func TestInDoubtCommandIsJudgedBySend(t *testing.T) {
	in := lineFaultInput(fault("kill-agent", "agent1", 12, 14)) // explains the in_doubt; no line fault
	in.Ops[0].Code = "in_doubt"
	wantClean(t, Check(in))
	in.Ops[0].Code = "ok"
	wantViolation(t, Check(in), I2, "stale apply", `id "c1"`)
}

// A command without an answer that a stall held may reach its device well
// after the heal — behind requests the driver gave up on while the line was
// stalled (found by the harness: 1.4 s after the heal). One the agent
// answered (its driver waited for it) may not come that late.
func TestUnansweredCommandBehindAStallBacklog(t *testing.T) {
	in := func(code string, end int) Input {
		return Input{Domains: twoDevices, DoubtFaults: doubtKinds, LineFaults: []string{"stall"},
			Faults: []history.Fault{fault("stall", "fw1", 5, 50)},
			Ops:    []history.Op{command("sup1", "fw1", "c1", "d1", 1, 2, code, 10, end)},
			Applies: []sim.Entry{
				apply("fw2", "c2", "d1", "sup2", 1, 3, 25, 30),
				apply("fw1", "c1", "d1", "sup1", 1, 2, 1450, 1451),
			}}
	}
	wantClean(t, Check(in("", -1)))
	wantViolation(t, Check(in("ok", 1460)), I2, "stale apply", `id "c1"`)
}
