package check

import (
	"testing"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/devices/sim"
)

// A command answered ok that no device log has is lost.
func TestAcknowledgedLostFails(t *testing.T) {
	r := Check(Input{Domains: twoDevices,
		Ops: []history.Op{command("sup1", "fw1", "c1", "d1", 1, 1, "ok", 10, 20)},
		// The same id on another device does not count.
		Applies: []sim.Entry{apply("fw2", "c1", "d1", "sup1", 1, 1, 11, 12)},
	})
	wantViolation(t, r, I4, "acknowledged command lost", `sup1 command id "c1" (op set) on fw1`, `fw1 never applied id "c1"`)
}

// The near miss: the entry is there; and an unanswered or non-ok command
// need not be.
func TestAcknowledgedPresentPasses(t *testing.T) {
	wantClean(t, Check(Input{Domains: twoDevices,
		Ops: []history.Op{
			command("sup1", "fw1", "c1", "d1", 1, 1, "ok", 10, 20),
			command("sup1", "fw1", "c2", "d1", 1, 1, "", 21, -1),
			command("sup1", "fw1", "c3", "d1", 1, 1, "device_unavailable", 22, 23),
			command("sup1", "fw1", "c1", "d1", 1, 1, "ok", 24, 25), // a retry got the same result back
		},
		Applies: []sim.Entry{apply("fw1", "c1", "d1", "sup1", 1, 1, 11, 12)},
	}))
}

// A non-idempotent command answered ok is applied exactly once.
func TestAcknowledgedAppliedTwiceFails(t *testing.T) {
	r := Check(Input{Domains: twoDevices, DoubtFaults: doubtKinds,
		Ops: []history.Op{command("sup1", "fw1", "c1", "d1", 1, 1, "ok", 10, 40)},
		Applies: []sim.Entry{
			apply("fw1", "c1", "d1", "sup1", 1, 1, 11, 12),
			apply("fw1", "c1", "d1", "sup1", 1, 1, 30, 31),
		},
		Faults: []history.Fault{fault("kill-agent", "agent1", 20, 20)},
	})
	wantViolation(t, r, I4, "not applied exactly once", "applied 2 times")
	wantViolation(t, r, I4, `device fw1 applied id "c1" twice (not idempotent)`)
}

// The near miss: an idempotent command in doubt (answered in_doubt around
// a crash) may be applied twice.
func TestIdempotentInDoubtTwicePasses(t *testing.T) {
	wantClean(t, Check(Input{Domains: twoDevices, DoubtFaults: doubtKinds,
		Ops: []history.Op{
			idem(command("sup1", "fw1", "c1", "d1", 1, 1, "in_doubt", 10, 40)),
			idem(command("sup1", "fw1", "c1", "d1", 1, 1, "ok", 41, 45)),
		},
		Applies: []sim.Entry{
			idemEntry(apply("fw1", "c1", "d1", "sup1", 1, 1, 11, 12)),
			idemEntry(apply("fw1", "c1", "d1", "sup1", 1, 1, 42, 43)),
		},
		Faults: []history.Fault{fault("kill-agent", "agent1", 20, 20)},
	}))
}

// An idempotent command applied twice without being in doubt fails; so
// does a fault of a kind that leaves nothing in doubt.
func TestDoubleApplyNotInDoubtFails(t *testing.T) {
	for name, faults := range map[string][]history.Fault{
		"no fault":        nil,
		"partition":       {fault("partition", "agent1", 20, 25)},
		"doubt too early": {fault("kill-agent", "agent1", 5, 5)},
	} {
		t.Run(name, func(t *testing.T) {
			r := Check(Input{Domains: twoDevices, DoubtFaults: doubtKinds, Faults: faults, Applies: []sim.Entry{
				idemEntry(apply("fw1", "c1", "d1", "sup1", 1, 1, 10, 11)),
				idemEntry(apply("fw1", "c1", "d1", "sup1", 1, 1, 30, 31)),
			}})
			wantViolation(t, r, I4, `device fw1 applied id "c1" twice (idempotent, but not in doubt`,
				"[kill-agent, kill-plugin, reboot, stall, unplug]", "fw1 entry 0", "fw1 entry 1")
		})
	}
}

// The near miss: a fault of a doubt kind started between the two starts
// (at either boundary too).
func TestDoubleApplyFaultBetweenPasses(t *testing.T) {
	for name, at := range map[string]int{"between": 20, "at first": 10, "at second": 30} {
		t.Run(name, func(t *testing.T) {
			wantClean(t, Check(Input{Domains: twoDevices, DoubtFaults: doubtKinds,
				Faults: []history.Fault{fault("unplug", "fw1", at, at+100)},
				Applies: []sim.Entry{
					idemEntry(apply("fw1", "c1", "d1", "sup1", 1, 1, 10, 11)),
					idemEntry(apply("fw1", "c1", "d1", "sup1", 1, 1, 30, 31)),
				}}))
		})
	}
}

// A non-idempotent command applied twice fails even around a crash.
func TestDoubleApplyNonIdempotentWithFaultFails(t *testing.T) {
	r := Check(Input{Domains: twoDevices, DoubtFaults: doubtKinds,
		Faults: []history.Fault{fault("kill-agent", "agent1", 20, 20)},
		Applies: []sim.Entry{
			apply("fw1", "c1", "d1", "sup1", 1, 1, 10, 11),
			apply("fw1", "c1", "d1", "sup1", 1, 1, 30, 31),
		}})
	wantViolation(t, r, I4, `device fw1 applied id "c1" twice (not idempotent)`)
}

// The same id on two devices is two commands.
func TestDoubleApplyOtherDevicePasses(t *testing.T) {
	wantClean(t, Check(Input{Domains: twoDevices, Applies: []sim.Entry{
		apply("fw1", "c1", "d1", "sup1", 1, 1, 10, 11),
		apply("fw2", "c1", "d1", "sup1", 1, 1, 30, 31),
	}}))
}

// An in_doubt answer with no crash while the command was in flight fails.
func TestInDoubtWithoutCrashFails(t *testing.T) {
	for name, faults := range map[string][]history.Fault{
		"no fault":      nil,
		"after":         {fault("kill-agent", "agent1", 25, 25)},
		"before":        {fault("stall", "agent1", 2, 8)}, // healed before the command
		"not a doubter": {fault("partition", "agent1", 15, 16)},
	} {
		t.Run(name, func(t *testing.T) {
			r := Check(Input{Domains: twoDevices, DoubtFaults: doubtKinds, Faults: faults,
				Ops: []history.Op{command("sup1", "fw1", "c1", "d1", 1, 1, "in_doubt", 10, 20)}})
			wantViolation(t, r, I4, "in_doubt without a crash", `sup1 command id "c1"`, "answered in_doubt")
		})
	}
}

// The near miss: a doubt fault in effect at some moment of [start, end],
// the ends included — also one that began before and was still on (a
// command sent into a stalled line).
func TestInDoubtAroundCrashPasses(t *testing.T) {
	for name, at := range map[string]int{"inside": 15, "at start": 10, "at end": 20, "still in effect": 6} {
		t.Run(name, func(t *testing.T) {
			wantClean(t, Check(Input{Domains: twoDevices, DoubtFaults: doubtKinds,
				Faults: []history.Fault{fault("reboot", "fw1", at, at+5)},
				Ops:    []history.Op{command("sup1", "fw1", "c1", "d1", 1, 1, "in_doubt", 10, 20)}}))
		})
	}
}

// A retry answered differently from an earlier decided answer fails;
// busy, internal and expired decide nothing, and an idempotent command in
// doubt may be applied again.
func TestRetryAnsweredDifferentlyFails(t *testing.T) {
	kill := []history.Fault{fault("kill-agent", "agent1", 15, 30)}
	r := Check(Input{Domains: twoDevices, DoubtFaults: doubtKinds, Faults: kill, Ops: []history.Op{
		command("sup1", "fw1", "c1", "d1", 1, 1, "device_error", 10, 40),
		command("sup1", "fw1", "c1", "d1", 1, 1, "in_doubt", 41, 42),
	}})
	wantViolation(t, r, I4, "retry answered differently", `id "c1"`, "answered device_error", "answered in_doubt")
	wantClean(t, Check(Input{Domains: twoDevices, DoubtFaults: doubtKinds, Faults: kill,
		Ops: []history.Op{
			command("sup1", "fw1", "c1", "d1", 1, 1, "busy", 5, 8),
			command("sup1", "fw1", "c1", "d1", 1, 1, "internal", 9, 10),
			command("sup1", "fw1", "c1", "d1", 1, 1, "expired", 9, 10),
			idem(command("sup1", "fw1", "c1", "d1", 1, 1, "in_doubt", 10, 40)),
			idem(command("sup1", "fw1", "c1", "d1", 1, 1, "ok", 41, 42)),
			idem(command("sup1", "fw1", "c1", "d1", 1, 1, "ok", 43, 44)),
		},
		Applies: []sim.Entry{idemEntry(apply("fw1", "c1", "d1", "sup1", 1, 1, 41, 41))}}))
}

// A retry answered in_doubt long after the crash is explained by it: the
// command's life runs from its first send.
func TestInDoubtRetryAfterTheCrashPasses(t *testing.T) {
	wantClean(t, Check(Input{Domains: twoDevices, DoubtFaults: doubtKinds,
		Faults: []history.Fault{fault("kill-agent", "agent1", 15, 30)},
		Ops: []history.Op{
			command("sup1", "fw1", "c1", "d1", 1, 1, "", 10, -1),
			command("sup1", "fw1", "c1", "d1", 1, 1, "in_doubt", 60, 61),
		}}))
}

// An in_doubt answer at the command's own deadline is the driver giving up
// at that deadline: no crash needed. One well before it needs one.
func TestInDoubtAtDeadlinePasses(t *testing.T) {
	o := command("sup1", "fw1", "c1", "d1", 1, 1, "in_doubt", 10, 40)
	o.Deadline = ms(40)
	wantClean(t, Check(Input{Domains: twoDevices, DoubtFaults: doubtKinds, Ops: []history.Op{o}}))
	o.Deadline = ms(400)
	wantViolation(t, Check(Input{Domains: twoDevices, DoubtFaults: doubtKinds, Ops: []history.Op{o}}), I4, "in_doubt without a crash")
}
