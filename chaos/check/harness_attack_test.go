package check

// Attacks on the checker: histories that break I1, I2 or I4 but that the
// checker passes (false negatives). Each test asserts the violation; on
// the checker as it is they fail, which is the finding.

import (
	"testing"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/devices/sim"
)

// lineKinds are the LineFaults of the harness (chaos.LineFaults).
var lineKinds = []string{"stall", "unplug"}

// attackDevices: fw1 (firmware on a line) and sim2 in d1; sim3 and plugin4
// in d2.
var attackDevices = map[string]string{"fw1": "d1", "sim2": "d1", "sim3": "d2", "plugin4": "d2"}

// withFence is o answered with a fence (a stale_token answer shows one).
func withFence(o history.Op, epoch, seq uint64) history.Op {
	o.FenceEpoch, o.FenceSeq = epoch, seq
	return o
}

// I2 — a stall of fw1 that began after c1 was sent and healed at 20 ms,
// long before d1@1.3 became durable (applied on sim2 at 30 ms), makes the
// checker judge c1 (d1@1.2) by its send at 10 ms although fw1 took it at
// 5 s: bytes held by a stall arrive when it heals (20 ms), so a frame the
// firmware took 5 s later was written long after the heal — after d1@1.3
// was durable. The exemption only asks whether any line fault overlapped
// [send, started], not whether it could still have held the bytes.
func TestAttackShortStallLongBeforeHidesStaleApply(t *testing.T) {
	r := Check(Input{Domains: attackDevices, DoubtFaults: doubtKinds, LineFaults: lineKinds,
		Faults: []history.Fault{fault("stall", "fw1", 15, 20)},
		Ops: []history.Op{
			command("sup1", "fw1", "c1", "d1", 1, 2, "ok", 10, 5010),
			command("sup2", "sim2", "c2", "d1", 1, 3, "ok", 22, 31),
		},
		Applies: []sim.Entry{
			apply("sim2", "c2", "d1", "sup2", 1, 3, 25, 30),
			apply("fw1", "c1", "d1", "sup1", 1, 2, 5000, 5001),
		}})
	wantViolation(t, r, I2, "stale apply", `id "c1"`)
}

// I2 — the pipeline step on the firmware with an agent that skips its
// recheck: a pulse (d1@1.2) holds fw1 for 3 s, a set c1 of the same lease
// waits in the agent's queue behind it, a stall of fw1 comes and goes
// during the pulse, the lease passes to sup2 whose d1@1.3 is applied on
// sim2 at 510 ms; when the pulse ends the agent hands c1 to the driver
// (stale) and fw1 takes it at 3005 ms. The stall during the pulse makes
// the checker judge c1 by its send at 10 ms: the mutant's stale apply
// passes.
func TestAttackStallDuringPulseHidesQueuedStaleSet(t *testing.T) {
	pulse := command("sup1", "fw1", "p1", "d1", 1, 2, "ok", 5, 3002)
	pulse.Op = "pulse"
	pulseEntry := apply("fw1", "p1", "d1", "sup1", 1, 2, 8, 3000)
	pulseEntry.Op = "pulse"
	r := Check(Input{Domains: attackDevices, DoubtFaults: doubtKinds, LineFaults: lineKinds,
		Faults: []history.Fault{fault("stall", "fw1", 100, 150)},
		Ops: []history.Op{
			pulse,
			command("sup1", "fw1", "c1", "d1", 1, 2, "ok", 10, 3007),
			command("sup2", "sim2", "c2", "d1", 1, 3, "ok", 500, 511),
		},
		Applies: []sim.Entry{
			pulseEntry,
			apply("sim2", "c2", "d1", "sup2", 1, 3, 505, 510),
			apply("fw1", "c1", "d1", "sup1", 1, 2, 3005, 3006),
		}})
	wantViolation(t, r, I2, "stale apply", `id "c1"`)
}

// I2 — the exemption takes the *first* send of an id: c1's first attempt
// was refused busy at 11 ms (never queued, so nothing of it could sit in
// the line); the retry went out at 4 s, after the stall of fw1 (100 ms –
// 3 s) had healed and after d1@1.3 was durable (200 ms); fw1 took it at
// 4.01 s. It left the agent after 4 s — a stale apply — but the checker
// judges it by the busy attempt's send at 10 ms.
func TestAttackEarlierBusyAttemptHidesStaleRetry(t *testing.T) {
	r := Check(Input{Domains: attackDevices, DoubtFaults: doubtKinds, LineFaults: lineKinds,
		Faults: []history.Fault{fault("stall", "fw1", 100, 3000)},
		Ops: []history.Op{
			command("sup1", "fw1", "c1", "d1", 1, 2, "busy", 10, 11),
			command("sup2", "sim2", "c2", "d1", 1, 3, "ok", 150, 201),
			command("sup1", "fw1", "c1", "d1", 1, 2, "ok", 4000, 4012),
		},
		Applies: []sim.Entry{
			apply("sim2", "c2", "d1", "sup2", 1, 3, 190, 200),
			apply("fw1", "c1", "d1", "sup1", 1, 2, 4010, 4011),
		}})
	wantViolation(t, r, I2, "stale apply", `id "c1"`)
}

// I2 — an entry makes its position durable when it *started* (I3: the
// agent made d1@1.3 durable before the driver saw it), but the checker
// counts it only from when it was applied (At). A 2 s pulse of d1@1.3 on
// sim2 starting at 100 ms hides a d1@1.2 set that the sibling device fw1
// took at 1 s, 900 ms after d1@1.3 was provably durable.
func TestAttackLongPulseHidesStaleApplyOnSibling(t *testing.T) {
	pulseEntry := apply("sim2", "p2", "d1", "sup2", 1, 3, 100, 2100)
	pulseEntry.Op = "pulse"
	r := Check(Input{Domains: attackDevices, Applies: []sim.Entry{
		pulseEntry,
		apply("fw1", "c1", "d1", "sup1", 1, 2, 1000, 1001),
	}})
	wantViolation(t, r, I2, "stale apply", `id "c1"`)
}

// I2 — answers that prove a position durable at the agent but are not in
// durableCodes: a stale_token answer shows the agent's durable fence (here
// d1@1.3, raised by sup2's grant before sup2 sent anything), and
// device_unavailable is answered only after Accept made the command's
// token durable (a plugin that is down). Either way d1@1.3 was durable at
// 20 ms, and sup1's d1@1.2 set c1 (queued earlier, a burst) entering sim2
// at 50 ms is stale; the checker sees nothing durable.
func TestAttackDurableAnswersIgnored(t *testing.T) {
	for name, proof := range map[string]history.Op{
		"stale_token fence":  withFence(command("sup1", "sim2", "c0", "d1", 1, 2, "stale_token", 5, 20), 1, 3),
		"device_unavailable": command("sup2", "fw1", "c2", "d1", 1, 3, "device_unavailable", 5, 20),
	} {
		t.Run(name, func(t *testing.T) {
			r := Check(Input{Domains: attackDevices, DoubtFaults: doubtKinds,
				Ops:     []history.Op{proof, command("sup1", "sim2", "c1", "d1", 1, 2, "", 4, -1)},
				Applies: []sim.Entry{apply("sim2", "c1", "d1", "sup1", 1, 2, 50, 51)},
			})
			wantViolation(t, r, I2, "stale apply", `id "c1"`)
		})
	}
}

// I4 — an idempotent command acknowledged ok (answer at 20 ms, before the
// agent was killed at 30 ms) is applied again by its retry at 55 ms: the
// result the agent published did not survive the crash (the journal lost
// it), the retry did not get it back and was re-applied. The checker
// allows an idempotent ok command any number of entries, and excuses the
// double apply by the kill between the two starts — but the in-doubt
// exception is for commands without a result, not for acknowledged ones.
func TestAttackAcknowledgedIdempotentReappliedAfterCrash(t *testing.T) {
	r := Check(Input{Domains: attackDevices, DoubtFaults: doubtKinds,
		Faults: []history.Fault{fault("kill-agent", "agent1", 30, 40)},
		Ops: []history.Op{
			idem(command("sup1", "sim2", "c1", "d1", 1, 1, "ok", 10, 20)),
			idem(command("sup1", "sim2", "c1", "d1", 1, 1, "ok", 50, 60)),
		},
		Applies: []sim.Entry{
			idemEntry(apply("sim2", "c1", "d1", "sup1", 1, 1, 12, 13)),
			idemEntry(apply("sim2", "c1", "d1", "sup1", 1, 1, 55, 56)),
		}})
	if count(r, I4) == 0 {
		t.Fatalf("an acknowledged command re-applied after a crash passed: %v", r.Violations)
	}
}

// I4 — "a retried command (same id) gets the same result back": c1 was
// answered ok at 20 ms and applied once; after an agent kill its retry is
// answered stale_token (the journal lost the result, the retry was
// decided afresh against a newer fence) or in_doubt (the journal lost the
// result, kept the accept). The acknowledged result is lost, yet the
// checker only looks at whether an entry exists.
func TestAttackRetryOfAcknowledgedGetsAnotherAnswer(t *testing.T) {
	for _, code := range []string{"stale_token", "in_doubt"} {
		t.Run(code, func(t *testing.T) {
			r := Check(Input{Domains: attackDevices, DoubtFaults: doubtKinds,
				Faults: []history.Fault{fault("kill-agent", "agent1", 30, 55)},
				Ops: []history.Op{
					command("sup1", "sim2", "c1", "d1", 1, 1, "ok", 10, 20),
					command("sup1", "sim2", "c1", "d1", 1, 1, code, 50, 60),
				},
				Applies: []sim.Entry{apply("sim2", "c1", "d1", "sup1", 1, 1, 12, 13)},
			})
			if count(r, I4) == 0 {
				t.Fatalf("retry of an acknowledged command answered %s passed: %v", code, r.Violations)
			}
		})
	}
}

// I4 — doubt faults are matched by time only, never by target: a stall of
// fw1's line (domain d1) excuses an in_doubt answer from sim3 and a double
// apply on sim3 (domain d2, nothing of it on that line; a sim device is in
// doubt only when its agent dies).
func TestAttackUnrelatedStallExcusesDoubt(t *testing.T) {
	t.Run("in_doubt answer", func(t *testing.T) {
		r := Check(Input{Domains: attackDevices, DoubtFaults: doubtKinds, LineFaults: lineKinds,
			Faults: []history.Fault{fault("stall", "fw1", 20, 30)},
			Ops:    []history.Op{command("sup1", "sim3", "c1", "d2", 1, 1, "in_doubt", 10, 40)},
		})
		wantViolation(t, r, I4, "in_doubt without a crash", `id "c1"`)
	})
	t.Run("double apply", func(t *testing.T) {
		r := Check(Input{Domains: attackDevices, DoubtFaults: doubtKinds, LineFaults: lineKinds,
			Faults: []history.Fault{fault("stall", "fw1", 20, 30)},
			Applies: []sim.Entry{
				idemEntry(apply("sim3", "c1", "d2", "sup1", 1, 1, 10, 11)),
				idemEntry(apply("sim3", "c1", "d2", "sup1", 1, 1, 40, 41)),
			}})
		wantViolation(t, r, I4, `device sim3 applied id "c1" twice`)
	})
}

// I1 — the controller hands sup1's *new* acquisition the position of the
// lease sup1 had released (a controller that lost its last write in a
// crash and re-minted the seq): two grants of d1@1.3, the second starting
// after the release of the first was answered. In the harness each
// Acquire op is one SDK call with its own request id (the SDK's resends
// stay inside the op), so two ops never legitimately share a grant; but
// sameGrant (same proc, holder, position) waives grant order, shared
// positions and the porcupine model alike.
func TestAttackRegrantOfReleasedPositionToSameHolder(t *testing.T) {
	r := Check(Input{Ops: []history.Op{
		grant("sup1", "d1", 1, 3, 0, 10),
		release("sup1", "d1", "released", 1, 3, 12, 14, 500),
		grant("sup1", "d1", 1, 3, 20, 30),
	}})
	if count(r, I1) == 0 {
		t.Fatalf("a released position granted again to a new acquisition passed: %v", r.Violations)
	}
}
