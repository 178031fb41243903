package check

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/protocol"
)

// checkI4 runs the rules of I4.
func checkI4(ix *index) []Violation {
	cmds := allCommands(ix)
	var vs []Violation
	vs = append(vs, checkAcknowledged(cmds, ix.byID)...)
	vs = append(vs, checkAfterAcknowledged(cmds, ix.byID)...)
	vs = append(vs, checkSameAnswer(cmds)...)
	vs = append(vs, checkDoubleApply(ix, inDoubtIDs(cmds))...)
	vs = append(vs, checkInDoubt(ix, cmds)...)
	return vs
}

// allCommands returns every command op, sorted by start, then device and
// id (stable: input order breaks ties).
func allCommands(ix *index) []history.Op {
	var cmds []history.Op
	for _, d := range sortedKeys(ix.commands) {
		cmds = append(cmds, ix.commands[d]...)
	}
	slices.SortStableFunc(cmds, func(a, b history.Op) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Device, b.Device), cmp.Compare(a.ID, b.ID))
	})
	return cmds
}

// inDoubtIDs is the set of commands some op got in_doubt for.
func inDoubtIDs(cmds []history.Op) map[deviceID]bool {
	ids := map[deviceID]bool{}
	for _, o := range cmds {
		if o.Answered() && o.Code == string(protocol.CodeInDoubt) {
			ids[deviceID{o.Device, o.ID}] = true
		}
	}
	return ids
}

// idempotent reports whether a command is idempotent: its op says so, or
// every entry of it does.
func idempotent(o history.Op, es []entry) bool {
	return o.Idempotent || (len(es) > 0 && !slices.ContainsFunc(es, func(e entry) bool { return !e.Idempotent }))
}

// checkAcknowledged is I4's nothing acknowledged is lost: every command
// answered ok has an entry for its (device, id) in the apply logs, and
// exactly one unless it is idempotent. Each (device, id) is reported once.
func checkAcknowledged(cmds []history.Op, byID map[deviceID][]entry) []Violation {
	seen := map[deviceID]bool{}
	var vs []Violation
	for _, o := range cmds {
		k := deviceID{o.Device, o.ID}
		if !o.Answered() || o.Code != string(protocol.CodeOK) || seen[k] {
			continue
		}
		seen[k] = true
		es := byID[k]
		switch {
		case len(es) == 0:
			vs = append(vs, Violation{I4, fmt.Sprintf("acknowledged command lost: %s, but %s never applied id %q",
				describeOp(o), o.Device, o.ID)})
		case len(es) > 1 && !idempotent(o, es):
			vs = append(vs, Violation{I4, fmt.Sprintf("acknowledged command not applied exactly once: %s, applied %d times: %s",
				describeOp(o), len(es), describeEntries(es))})
		}
	}
	return vs
}

// checkAfterAcknowledged is I4's nothing acknowledged is lost: once a
// command was answered ok, no entry of it starts later (the published
// result must survive, so a retry is answered from it and never applied
// again, idempotent or not). Each (device, id) is reported once.
func checkAfterAcknowledged(cmds []history.Op, byID map[deviceID][]entry) []Violation {
	acked := map[deviceID]history.Op{} // the first ok answer, by end
	for _, o := range cmds {
		k := deviceID{o.Device, o.ID}
		if first, ok := acked[k]; o.Answered() && o.Code == string(protocol.CodeOK) && (!ok || o.End < first.End) {
			acked[k] = o
		}
	}
	var vs []Violation
	for _, k := range slices.SortedFunc(maps.Keys(acked), func(a, b deviceID) int {
		return cmp.Or(cmp.Compare(a.Device, b.Device), cmp.Compare(a.ID, b.ID))
	}) {
		ack := acked[k]
		if i := slices.IndexFunc(byID[k], func(e entry) bool { return e.started > ack.End }); i >= 0 {
			vs = append(vs, Violation{I4, fmt.Sprintf("acknowledged command applied again: %s, then %s", describeOp(ack), byID[k][i].describe())})
		}
	}
	return vs
}

// undecided are answers that need decide nothing about a command: it was
// not queued (busy), the agent could not journal it (internal), or its
// deadline had passed on arrival (expired; a retry carries a deadline of
// its own and is decided afresh — from outside, that expired cannot be
// told from one journaled after a wait in the queue).
var undecided = map[string]bool{string(protocol.CodeBusy): true, string(protocol.CodeInternal): true,
	string(protocol.CodeExpired): true}

// checkSameAnswer is I4's a retried command gets the same result back:
// every decided answer to one (device, id) has the same code — except that
// an idempotent command answered in_doubt may be applied again by a retry,
// whose answer then stands. Each is reported once, at its first differing
// answer.
func checkSameAnswer(cmds []history.Op) []Violation {
	first := map[deviceID]history.Op{}
	reported := map[deviceID]bool{}
	var vs []Violation
	for _, o := range slices.SortedStableFunc(slices.Values(cmds), func(a, b history.Op) int { return cmp.Compare(a.End, b.End) }) {
		k := deviceID{o.Device, o.ID}
		if !o.Answered() || undecided[o.Code] || reported[k] {
			continue
		}
		f, ok := first[k]
		switch {
		case !ok, f.Code == string(protocol.CodeInDoubt) && o.Idempotent:
			first[k] = o // an idempotent command in doubt is applied again on retry: its new answer stands
		case f.Code != o.Code:
			reported[k] = true
			vs = append(vs, Violation{I4, fmt.Sprintf("retry answered differently: %s, then %s", describeOp(f), describeOp(o))})
		}
	}
	return vs
}

// checkDoubleApply is I4's no double apply: a (device, id) is applied more
// than once only if every entry of it is idempotent and it was in doubt —
// an op for it answered in_doubt, or a fault of a DoubtFaults kind started
// between the two entries' starts. Each (device, id) is reported once, at
// its first bad pair.
func checkDoubleApply(ix *index, inDoubt map[deviceID]bool) []Violation {
	keys := slices.SortedFunc(maps.Keys(ix.byID), func(a, b deviceID) int {
		return cmp.Or(cmp.Compare(a.Device, b.Device), cmp.Compare(a.ID, b.ID))
	})
	var vs []Violation
	for _, k := range keys {
		es := ix.byID[k]
		for i := 1; i < len(es); i++ {
			if why := doubleApplyFault(ix, es[i-1], es[i], inDoubt[k]); why != "" {
				vs = append(vs, Violation{I4, fmt.Sprintf("device %s applied id %q twice (%s): %s; %s",
					k.Device, k.ID, why, es[i-1].describe(), es[i].describe())})
				break
			}
		}
	}
	return vs
}

// doubleApplyFault says why applying a then b (one command) is wrong, or ""
// if it is allowed.
func doubleApplyFault(ix *index, a, b entry, answeredInDoubt bool) string {
	switch {
	case !a.Idempotent || !b.Idempotent:
		return "not idempotent"
	case answeredInDoubt || ix.doubtFaultIn(a.Device, a.started, b.started):
		return ""
	}
	return fmt.Sprintf("idempotent, but not in doubt: no in_doubt answer and no fault of kinds [%s] in effect in between",
		strings.Join(ix.doubtKeys, ", "))
}

// ranIntoDeadline reports whether o was answered at (or after) its own
// deadline: an agent that gives up on a command in its driver at the
// deadline answers in_doubt, with no crash.
func ranIntoDeadline(o history.Op) bool {
	return o.Deadline != 0 && o.End+int64(deadlineResolution) >= o.Deadline
}

// deadlineResolution allows for deadline_ms's whole milliseconds.
const deadlineResolution = 2 * time.Millisecond

// checkInDoubt is I4's in_doubt only around a crash: every command answered
// in_doubt was in flight while a fault of a DoubtFaults kind was in effect
// on its device — between its first send and that answer (a later retry
// of it gets the journaled in_doubt) — or ran into its own deadline in the
// driver (ranIntoDeadline).
func checkInDoubt(ix *index, cmds []history.Op) []Violation {
	since := map[deviceID]int64{} // the command's first send
	for _, o := range cmds {      // sorted by start
		if _, ok := since[deviceID{o.Device, o.ID}]; !ok {
			since[deviceID{o.Device, o.ID}] = o.Start
		}
	}
	var vs []Violation
	for _, o := range cmds {
		if !o.Answered() || o.Code != string(protocol.CodeInDoubt) || ranIntoDeadline(o) || ix.doubtFaultIn(o.Device, since[deviceID{o.Device, o.ID}], o.End) {
			continue
		}
		vs = append(vs, Violation{I4, fmt.Sprintf("in_doubt without a crash: %s, but no fault of kinds [%s] was in effect in that interval",
			describeOp(o), strings.Join(ix.doubtKeys, ", "))})
	}
	return vs
}

// describeEntries names entries for a message.
func describeEntries(es []entry) string {
	ds := make([]string, len(es))
	for i, e := range es {
		ds[i] = e.describe()
	}
	return strings.Join(ds, "; ")
}
