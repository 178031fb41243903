// Package check is the fault harness's checker: a pure function over the
// records of one schedule (every supervisor's Ops, the harness's Faults and
// every device's apply log) that judges the invariants of DESIGN §2 from the
// outside:
//
//   - I1 (monotonic grants, one holder at a time): grant order in real
//     time, no shared positions, linearizability of the lease history
//     (porcupine), and no two holders valid at one instant;
//   - I2 (no stale apply): per-device token order, nothing applied after a
//     newer token was durable at the agent, nothing of a holder after it
//     was told its lease was lost and a newer token applied;
//   - I4 (nothing acknowledged lost, no double apply), and in_doubt only
//     around a crash;
//   - progress: after the last fault healed, the probe gets a grant and an
//     applied command on every device, within a bound.
//
// Check never reads files; WriteLeaseVisualization writes the porcupine
// HTML of the lease history for a failed I1.
package check

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// The invariants a Violation names.
const (
	I1       = "I1"
	I2       = "I2"
	I4       = "I4"
	Progress = "progress"
)

// ProbeProc is the Proc of the harness's progress probe, run after the last
// fault healed.
const ProbeProc = "probe"

// DefaultLinearizeTimeout bounds porcupine's search per domain when
// Input.LinearizeTimeout is 0.
const DefaultLinearizeTimeout = 10 * time.Second

// Input is everything recorded of one schedule.
type Input struct {
	// Ops are every supervisor's records; Proc names the supervisor, and
	// ProbeProc the harness's progress probe.
	Ops    []history.Op
	Faults []history.Fault
	// Applies are all devices' apply logs; the entries of one device must
	// be in that device's log order (devices may be interleaved).
	Applies []sim.Entry
	// Domains maps each device id to its fencing domain.
	Domains map[string]string
	// Healed is when the last fault healed (Unix ns); 0 skips the progress
	// check.
	Healed int64
	// ProgressBound is the longest allowed time from Healed to the end of
	// each of the probe's required calls; 0 means no bound (only presence
	// is checked).
	ProgressBound time.Duration
	// DoubtFaults are the fault kinds that may leave a command in doubt,
	// e.g. "kill-agent", "kill-plugin", "unplug", "stall", "reboot".
	DoubtFaults []string
	// LineFaults are the fault kinds that hold bytes on a device's line
	// (e.g. "stall", "unplug"); their Target is the device. While one is in
	// effect, what the driver wrote may reach the device later, so I2
	// judges such a device's entry by when its command was sent, not when
	// the device took it (see entry.reach).
	LineFaults []string
	// Agents maps each device id to the agent that serves it, so that a
	// kill of one agent explains doubt only on its devices; nil means a
	// fault on a target that is no device covers every device.
	Agents map[string]string
	// DriverSlack is how much later than a newer position became durable
	// a device may take an older command and still count as having been
	// handed to its driver before: the checker sees when the device took a
	// command, not when the agent called the driver (a plugin's gRPC hop,
	// a goroutine descheduled between the agent's recheck and its call).
	// Default 0.
	DriverSlack time.Duration
	// ClockSlack is added to a grant's end before comparing it with an
	// earlier lease's validity end (I1, one holder at a time); default 0.
	ClockSlack time.Duration
	// LinearizeTimeout bounds porcupine per domain; 0 means
	// DefaultLinearizeTimeout.
	LinearizeTimeout time.Duration
}

// Violation is one broken rule.
type Violation struct {
	Invariant string // I1, I2, I4 or Progress
	Message   string // precise: ids, devices, positions, times
}

// String renders v as "invariant: message".
func (v Violation) String() string { return v.Invariant + ": " + v.Message }

// Report is Check's verdict on one schedule.
type Report struct {
	// Violations, sorted by invariant and message, without duplicates.
	Violations []Violation
	Stats      Stats
	// Progress is the longest time from Input.Healed to the end of one of
	// the probe's required calls (0 without a progress check).
	Progress time.Duration
	// Notes are remarks on the check itself that are no verdict, e.g. a
	// linearizability search that timed out.
	Notes []string
}

// Failed reports whether r has a violation of invariant.
func (r Report) Failed(invariant string) bool {
	return slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.Invariant == invariant })
}

// Check judges in against every rule of the package and returns all
// violations found, the schedule's statistics and the progress time. It
// does not modify in.
func Check(in Input) Report {
	ix := newIndex(in)
	var vs []Violation
	var notes []string
	vs = append(vs, checkI1(ix)...)
	lin, linNotes := checkLinearizable(ix)
	vs = append(vs, lin...)
	notes = append(notes, linNotes...)
	vs = append(vs, checkI2(ix)...)
	vs = append(vs, checkI4(ix)...)
	prog, pvs := checkProgress(ix)
	vs = append(vs, pvs...)
	vs = sortViolations(vs)
	return Report{Violations: vs, Stats: collectStats(in, vs), Progress: prog, Notes: notes}
}

// sortViolations sorts vs by invariant, then message, and drops duplicates.
func sortViolations(vs []Violation) []Violation {
	slices.SortFunc(vs, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Invariant, b.Invariant), cmp.Compare(a.Message, b.Message))
	})
	return slices.Compact(vs)
}

// position is a lease's place in its domain: (epoch, seq), ordered
// lexicographically.
type position struct{ Epoch, Seq uint64 }

// cmp orders p against q as fence.ComparePosition does.
func (p position) cmp(q position) int { return fence.ComparePosition(p.Epoch, p.Seq, q.Epoch, q.Seq) }

// String renders p as "epoch.seq".
func (p position) String() string { return fmt.Sprintf("%d.%d", p.Epoch, p.Seq) }

// opPos is the position an Op names.
func opPos(o history.Op) position { return position{o.Epoch, o.Seq} }

// entryPos is the position an apply entry carried.
func entryPos(e sim.Entry) position { return position{e.Epoch, e.Seq} }

// fmtTime renders a Unix-ns instant as UTC time of day with nanoseconds.
func fmtTime(ns int64) string { return time.Unix(0, ns).UTC().Format("15:04:05.000000000") }

// describeOp names an Op for a message: who, what, which lease or command,
// when, and the answer.
func describeOp(o history.Op) string {
	end, code := "no answer", o.Code
	if o.End != 0 {
		end = fmtTime(o.End)
	}
	if code == "" {
		code = "none"
	}
	what := fmt.Sprintf("%s %s %s@%s/%s", o.Proc, o.Kind, o.Domain, opPos(o), o.Holder)
	if o.Kind == history.Command {
		what = fmt.Sprintf("%s command id %q (op %s) on %s with %s@%s", o.Proc, o.ID, o.Op, o.Device, o.Domain, opPos(o))
	}
	return fmt.Sprintf("%s [%s, %s] answered %s", what, fmtTime(o.Start), end, code)
}

// entry is an apply-log entry with its place in the device's log and its
// times in Unix ns.
type entry struct {
	sim.Entry
	n       int   // index within the device's log
	started int64 // Started, Unix ns
	at      int64 // At, Unix ns
	// reach is the latest moment the command provably left the agent for
	// the device: started, or its first send if the line may have held it —
	// a line fault on the device was in effect between the send and
	// started (the line held bytes the driver wrote before), or the
	// command was answered in_doubt (the driver gave up on it; a busy
	// firmware takes what it received later).
	reach int64
}

// describe names e for a message.
func (e entry) describe() string {
	return fmt.Sprintf("%s entry %d id %q (op %s) at %s@%s/%s started %s applied %s",
		e.Device, e.n, e.ID, e.Op, e.Domain, entryPos(e.Entry), e.Holder, fmtTime(e.started), fmtTime(e.at))
}

// deviceID keys a command on one device.
type deviceID struct{ Device, ID string }

// index holds the input grouped the ways the rules read it.
type index struct {
	in          Input
	leaseOps    map[string][]history.Op // domain → acquire, release, lost, held ops, input order
	commands    map[string][]history.Op // domain → command ops, input order
	byDevice    map[string][]entry      // device → entries in log order
	byDomain    map[string][]entry      // domain → entries, devices in input order
	byID        map[deviceID][]entry    // (device, id) → entries in log order
	doubt       map[string]bool         // fault kinds that may leave commands in doubt
	doubtSpans  []doubtSpan             // faults of those kinds
	doubtKeys   []string                // sorted DoubtFaults, for messages
	domains     map[string]string       // Input.Domains
	agents      map[string]string       // Input.Agents
	driverSlack time.Duration           // Input.DriverSlack
}

// newIndex groups in's records.
func newIndex(in Input) *index {
	ix := &index{in: in, leaseOps: map[string][]history.Op{}, commands: map[string][]history.Op{},
		byDevice: map[string][]entry{}, byDomain: map[string][]entry{}, byID: map[deviceID][]entry{},
		doubt: map[string]bool{}}
	for _, o := range in.Ops {
		if o.Kind == history.Command {
			ix.commands[o.Domain] = append(ix.commands[o.Domain], o)
		} else {
			ix.leaseOps[o.Domain] = append(ix.leaseOps[o.Domain], o)
		}
	}
	sent, lines, doubted, answered := firstSends(in.Ops), lineSpans(in), inDoubt(in.Ops), answeredIDs(in.Ops)
	for _, a := range in.Applies {
		e := entry{Entry: a, n: len(ix.byDevice[a.Device]), started: a.Started.UnixNano(), at: a.At.UnixNano()}
		e.reach = e.started
		k := deviceID{a.Device, a.ID}
		delivery := lineBacklog // no answer came: it may have sat behind others the line held
		if answered[k] {
			delivery = lineDelivery
		}
		if t, ok := sent[k]; ok && t < e.started && (doubted[k] || heldByLine(lines[a.Device], t, e.started, delivery)) {
			e.reach = t
		}
		ix.byDevice[a.Device] = append(ix.byDevice[a.Device], e)
		ix.byDomain[a.Domain] = append(ix.byDomain[a.Domain], e)
		ix.byID[k] = append(ix.byID[k], e)
	}
	for _, k := range in.DoubtFaults {
		ix.doubt[k] = true
	}
	ix.doubtKeys = sortedKeys(ix.doubt)
	for _, f := range in.Faults {
		if ix.doubt[f.Kind] {
			ix.doubtSpans = append(ix.doubtSpans, doubtSpan{f.Target, f.Start, max(f.End, f.Start)})
		}
	}
	ix.domains, ix.agents, ix.driverSlack = in.Domains, in.Agents, in.DriverSlack
	return ix
}

// doubtFaultIn reports whether a fault of a DoubtFaults kind was in effect
// at some moment of [from, to]: it started before to and healed after from
// (a command sent into a stalled line is in doubt as much as one the stall
// caught). Faults are few; a scan is enough.
func (ix *index) doubtFaultIn(device string, from, to int64) bool {
	for _, d := range ix.doubtSpans {
		if d.start <= to && d.end >= from && ix.covers(d.target, device) {
			return true
		}
	}
	return false
}

// doubtSpan is a fault that may leave commands in doubt, on its target.
type doubtSpan struct {
	target     string
	start, end int64
}

// covers reports whether a fault on target can leave device's commands in
// doubt: it is the device (its line, its plugin), or the agent serving it;
// without an agent map, any target that is no device counts as an agent
// of every device.
func (ix *index) covers(target, device string) bool {
	if target == device {
		return true
	}
	if ix.agents != nil {
		return ix.agents[device] == target
	}
	_, isDevice := ix.domains[target]
	return !isDevice
}

// refusedAtIntake are the answers the agent gives before it accepts a
// command: an attempt answered so never reached the queue or the driver.
var refusedAtIntake = map[string]bool{
	string(protocol.CodeBusy): true, string(protocol.CodeBadRequest): true,
	string(protocol.CodeInvalidToken): true, string(protocol.CodeWrongDomain): true,
}

// firstSends is the earliest send of each (device, command id), among the
// attempts not refused at intake.
func firstSends(ops []history.Op) map[deviceID]int64 {
	m := map[deviceID]int64{}
	for _, o := range ops {
		if o.Kind != history.Command || o.Answered() && refusedAtIntake[o.Code] {
			continue
		}
		k := deviceID{o.Device, o.ID}
		if t, ok := m[k]; !ok || o.Start < t {
			m[k] = o.Start
		}
	}
	return m
}

// answeredIDs lists the commands with a decided answer: any but an
// intake refusal or in_doubt.
func answeredIDs(ops []history.Op) map[deviceID]bool {
	m := map[deviceID]bool{}
	for _, o := range ops {
		if o.Kind == history.Command && o.Answered() && !refusedAtIntake[o.Code] && o.Code != string(protocol.CodeInDoubt) {
			m[deviceID{o.Device, o.ID}] = true
		}
	}
	return m
}

// inDoubt lists the commands answered in_doubt at least once.
func inDoubt(ops []history.Op) map[deviceID]bool {
	m := map[deviceID]bool{}
	for _, o := range ops {
		if o.Kind == history.Command && o.Answered() && o.Code == string(protocol.CodeInDoubt) {
			m[deviceID{o.Device, o.ID}] = true
		}
	}
	return m
}

// lineSpans are the (start, end) of line faults, by device.
func lineSpans(in Input) map[string][][2]int64 {
	kinds := map[string]bool{}
	for _, k := range in.LineFaults {
		kinds[k] = true
	}
	m := map[string][][2]int64{}
	for _, f := range in.Faults {
		if kinds[f.Kind] {
			m[f.Target] = append(m[f.Target], [2]int64{f.Start, max(f.End, f.Start)})
		}
	}
	return m
}

// lineDelivery bounds how long after a line fault healed the bytes it held
// reach the device, for a command the agent answered (its driver waited
// for it); lineBacklog, for one without an answer, which may have queued
// in the line behind requests the driver gave up on (each up to a device
// timeout, 5 s in the harness).
const (
	lineDelivery = int64(time.Second)
	lineBacklog  = int64(5 * time.Second)
)

// heldByLine reports whether a line fault may have held a command sent at
// sent that the device took at took: the fault was in effect after the
// send, and the device took the command by its heal plus delivery.
func heldByLine(spans [][2]int64, sent, took, delivery int64) bool {
	for _, s := range spans {
		if s[0] <= took && s[1] >= sent && took <= s[1]+delivery {
			return true
		}
	}
	return false
}

// sortedKeys returns m's keys in order.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K { return slices.Sorted(maps.Keys(m)) }
