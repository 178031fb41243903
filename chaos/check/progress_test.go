package check

import (
	"testing"
	"time"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/devices/sim"
)

// progressInput is a schedule healed at 100 ms where the probe got d1
// (fw1, fw2) and d2 (fw3) and a command through on every device; extra ops
// are added.
func progressInput(extra ...history.Op) Input {
	ops := []history.Op{
		grant(ProbeProc, "d1", 1, 5, 110, 130),
		command(ProbeProc, "fw1", "p1", "d1", 1, 5, "ok", 131, 140),
		command(ProbeProc, "fw2", "p2", "d1", 1, 5, "ok", 131, 150),
		grant(ProbeProc, "d2", 1, 1, 110, 120),
		command(ProbeProc, "fw3", "p3", "d2", 1, 1, "ok", 121, 125),
	}
	return Input{
		Ops:     append(ops, extra...),
		Domains: map[string]string{"fw1": "d1", "fw2": "d1", "fw3": "d2"},
		Applies: []sim.Entry{
			apply("fw1", "p1", "d1", ProbeProc, 1, 5, 132, 133),
			apply("fw2", "p2", "d1", ProbeProc, 1, 5, 132, 133),
			apply("fw3", "p3", "d2", ProbeProc, 1, 1, 122, 123),
		},
		Healed:        ms(100),
		ProgressBound: 50 * time.Millisecond,
	}
}

// The probe reaching every domain and device within the bound passes, and
// Progress is the latest of its first successes.
func TestProgressPasses(t *testing.T) {
	r := Check(progressInput())
	wantClean(t, r)
	if r.Progress != 50*time.Millisecond {
		t.Errorf("Progress = %v, want 50ms (fw2's ok at 150 ms, healed at 100 ms)", r.Progress)
	}
}

// A device of a domain without an ok command from the probe fails, naming
// it.
func TestProgressMissingDeviceFails(t *testing.T) {
	in := progressInput()
	in.Ops[2].Code = "device_unavailable"
	r := Check(in)
	wantViolation(t, r, Progress, "domain d1: a command answered ok on device fw2", "got none", fmtTime(ms(100)))
	if n := count(r, Progress); n != 1 {
		t.Errorf("%d progress violations, want 1: %v", n, r.Violations)
	}
}

// A domain without a grant to the probe fails; so do calls started before
// the heal, and calls by others than the probe.
func TestProgressMissingGrantFails(t *testing.T) {
	cases := map[string]func(*Input){
		"held":          func(in *Input) { in.Ops[3] = acquire(ProbeProc, "d2", "held", 0, 0, 110, 120) },
		"before heal":   func(in *Input) { in.Ops[3] = grant(ProbeProc, "d2", 1, 1, 99, 120) },
		"not the probe": func(in *Input) { in.Ops[3] = grant("sup1", "d2", 1, 1, 110, 120) },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			in := progressInput()
			change(&in)
			wantViolation(t, Check(in), Progress, "domain d2: a granted acquire", "got none")
		})
	}
}

// A success later than the bound fails, with its time; at the bound passes.
func TestProgressOverBoundFails(t *testing.T) {
	in := progressInput()
	in.ProgressBound = 49 * time.Millisecond
	r := Check(in)
	wantViolation(t, r, Progress, "device fw2", "ended 50ms after the heal", "over the bound 49ms")
	if r.Progress != 50*time.Millisecond {
		t.Errorf("Progress = %v, want 50ms", r.Progress)
	}
	in.ProgressBound = 50 * time.Millisecond
	wantClean(t, Check(in))
}

// The earliest success counts: a later retry does not make it late.
func TestProgressEarliestCounts(t *testing.T) {
	in := progressInput(command(ProbeProc, "fw2", "p4", "d1", 1, 5, "ok", 151, 900))
	in.Applies = append(in.Applies, apply("fw2", "p4", "d1", ProbeProc, 1, 5, 152, 153))
	r := Check(in)
	wantClean(t, r)
	if r.Progress != 50*time.Millisecond {
		t.Errorf("Progress = %v, want 50ms", r.Progress)
	}
}

// Without a heal time there is no progress check.
func TestProgressOff(t *testing.T) {
	r := Check(Input{Domains: map[string]string{"fw1": "d1"}})
	wantClean(t, r)
	if r.Progress != 0 {
		t.Errorf("Progress = %v without a check", r.Progress)
	}
}
