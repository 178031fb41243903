package check

import (
	"testing"
	"time"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/devices/sim"
)

// One device's log going backwards in a domain fails (the cross-device
// rule sees it too, as d1@1.2 was durable once its device took it).
func TestDeviceOrderBackwardsFails(t *testing.T) {
	r := Check(Input{Domains: twoDevices, Applies: []sim.Entry{
		apply("fw1", "c1", "d1", "sup2", 1, 2, 10, 20),
		apply("fw1", "c2", "d1", "sup1", 1, 1, 15, 25),
	}})
	wantViolation(t, r, I2, "device fw1: token went backwards", `fw1 entry 1 id "c2"`, "d1@1.1", `fw1 entry 0 id "c1"`, "d1@1.2")
}

// The near miss: an equal position (the same lease) again, and a higher one
// after.
func TestDeviceOrderEqualAndRisingPasses(t *testing.T) {
	wantClean(t, Check(Input{Domains: twoDevices, Applies: []sim.Entry{
		apply("fw1", "c1", "d1", "sup1", 1, 2, 10, 20),
		apply("fw1", "c2", "d1", "sup1", 1, 2, 21, 25),
		apply("fw1", "c3", "d1", "sup2", 2, 1, 26, 30),
	}}))
}

// The log order of a device matters, not the order of Applies across
// devices: interleaved devices are read per device.
func TestDeviceOrderInterleavedDevicesPasses(t *testing.T) {
	wantClean(t, Check(Input{Domains: twoDevices, Applies: []sim.Entry{
		apply("fw1", "c1", "d1", "sup1", 1, 1, 10, 20),
		apply("fw2", "c2", "d1", "sup1", 1, 1, 11, 21),
		apply("fw1", "c3", "d1", "sup2", 1, 2, 30, 40),
		apply("fw2", "c4", "d1", "sup2", 1, 2, 31, 41),
	}}))
}

// An entry that started after a newer position was taken by another device
// of the domain is stale: I3 made the newer position durable before its
// driver saw it.
func TestStaleApplyAfterNewerEntryFails(t *testing.T) {
	r := Check(Input{Domains: twoDevices, Applies: []sim.Entry{
		apply("fw1", "c2", "d1", "sup2", 1, 2, 10, 20),
		apply("fw2", "c1", "d1", "sup1", 1, 1, 15, 30),
	}})
	wantViolation(t, r, I2, "domain d1: stale apply", `fw2 entry 0 id "c1"`, "d1@1.2 was durable at the agent at "+fmtTime(ms(10)),
		`applied as fw1 entry 0 id "c2"`)
}

// The near misses: the older command started at the instant the newer
// did (not after), within DriverSlack of it, or the newer was in another
// domain.
func TestStaleApplyNearMissesPass(t *testing.T) {
	wantClean(t, Check(Input{Domains: twoDevices, Applies: []sim.Entry{
		apply("fw1", "c2", "d1", "sup2", 1, 2, 10, 20),
		apply("fw2", "c1", "d1", "sup1", 1, 1, 10, 30),
	}}))
	wantClean(t, Check(Input{Domains: twoDevices, DriverSlack: 5 * time.Millisecond, Applies: []sim.Entry{
		apply("fw1", "c2", "d1", "sup2", 1, 2, 10, 20),
		apply("fw2", "c1", "d1", "sup1", 1, 1, 15, 30),
	}}))
	wantClean(t, Check(Input{Domains: map[string]string{"fw1": "d2", "fw2": "d1"}, Applies: []sim.Entry{
		apply("fw1", "c2", "d2", "sup2", 1, 2, 10, 20),
		apply("fw2", "c1", "d1", "sup1", 1, 1, 21, 30),
	}}))
}

// An entry that started after a command with a newer position was answered
// with a code the agent gives only after durable acceptance is stale.
func TestStaleApplyAfterDurableAnswerFails(t *testing.T) {
	for _, code := range []string{"device_error", "device_timeout"} {
		t.Run(code, func(t *testing.T) {
			r := Check(Input{Domains: twoDevices,
				Ops:     []history.Op{command("sup2", "fw1", "c2", "d1", 1, 2, code, 5, 20)},
				Applies: []sim.Entry{apply("fw2", "c1", "d1", "sup1", 1, 1, 25, 30)},
			})
			wantViolation(t, r, I2, "stale apply", `fw2 entry 0 id "c1"`, `answered to sup2 command id "c2"`, "answered "+code)
		})
	}
}

// The near miss: answers that prove nothing durable (stale_token, busy,
// none), or an answer after the older command started.
func TestStaleApplyNonDurableAnswersPass(t *testing.T) {
	for name, op := range map[string]history.Op{
		"stale_token": command("sup2", "fw1", "c2", "d1", 1, 2, "stale_token", 5, 20),
		"busy":        command("sup2", "fw1", "c2", "d1", 1, 2, "busy", 5, 20),
		"no answer":   command("sup2", "fw1", "c2", "d1", 1, 2, "", 5, -1),
		"later":       command("sup2", "fw1", "c2", "d1", 1, 2, "device_error", 5, 26),
	} {
		t.Run(name, func(t *testing.T) {
			wantClean(t, Check(Input{Domains: twoDevices, Ops: []history.Op{op},
				Applies: []sim.Entry{apply("fw2", "c1", "d1", "sup1", 1, 1, 25, 30)}}))
		})
	}
}

// A holder's entry that started after it was told its lease was lost and a
// newer token was applied fails with its own wording.
func TestAfterLostFails(t *testing.T) {
	r := Check(Input{Domains: twoDevices,
		Ops: []history.Op{
			grant("sup1", "d1", 1, 1, 0, 5),
			event(history.Lost, "sup1", "d1", 1, 1, 50, 45),
			grant("sup2", "d1", 1, 2, 30, 46),
		},
		Applies: []sim.Entry{
			apply("fw2", "c2", "d1", "sup2", 1, 2, 39, 40),
			apply("fw1", "c1", "d1", "sup1", 1, 1, 60, 61),
		},
	})
	wantViolation(t, r, I2, "applied after the lease was lost and a newer token applied", `fw1 entry 0 id "c1"`,
		"told the lease was lost at "+fmtTime(ms(50)), `fw2 entry 0 id "c2"`)
	wantViolation(t, r, I2, "stale apply", `fw1 entry 0 id "c1"`)
}

// The near misses: the holder's entry started after the loss but no newer
// token was applied before it, or before the loss was reported.
func TestAfterLostNearMissesPass(t *testing.T) {
	ops := []history.Op{
		grant("sup1", "d1", 1, 1, 0, 5),
		event(history.Lost, "sup1", "d1", 1, 1, 50, 45),
		grant("sup2", "d1", 1, 2, 30, 46),
	}
	// The newer token was applied only after the old command started.
	wantClean(t, Check(Input{Domains: twoDevices, Ops: ops, Applies: []sim.Entry{
		apply("fw1", "c1", "d1", "sup1", 1, 1, 60, 61),
		apply("fw2", "c2", "d1", "sup2", 1, 2, 69, 70),
	}}))
	// No newer token applied at all.
	wantClean(t, Check(Input{Domains: twoDevices, Ops: ops, Applies: []sim.Entry{
		apply("fw1", "c1", "d1", "sup1", 1, 1, 60, 61),
	}}))
	// Started before the loss was reported: only the stale rule, not this
	// one (the newer token was applied first).
	r := Check(Input{Domains: twoDevices, Ops: ops, Applies: []sim.Entry{
		apply("fw2", "c2", "d1", "sup2", 1, 2, 39, 40),
		apply("fw1", "c1", "d1", "sup1", 1, 1, 48, 49),
	}})
	wantNoViolationWith(t, r, I2, "after the lease was lost")
	wantViolation(t, r, I2, "stale apply")
}
