package check

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/protocol"
)

// leaseCall is a lease request as porcupine sees it.
type leaseCall struct {
	Domain string
	Kind   history.Kind // Acquire or Release
	Holder string
	Pos    position // Release: the lease released
}

// leaseAnswer is a lease request's answer as porcupine sees it.
type leaseAnswer struct {
	Code    string
	Pos     position // granted: the lease granted
	Unknown bool     // no answer came: the request may have taken effect or not (see leaseOperations)
}

// grantState is the lease model's state: the highest position granted so
// far and its holder (zero before the first grant).
type grantState struct {
	Pos    position
	Holder string
}

// stepLease is the sequential specification of one domain's leases. An
// acquire answered granted(p) is legal iff p is above the highest grant so
// far (or is that grant again to the same holder: a retried request id),
// and p becomes the highest. A release answered released(p) is legal iff p
// is the highest grant: releasing a superseded lease answers not_holder.
// Every other answer, and no answer, is legal and changes nothing.
func stepLease(state, input, output any) (bool, any) {
	s, c, a := state.(grantState), input.(leaseCall), output.(leaseAnswer)
	zero := s.Pos == position{}
	switch {
	case a.Unknown:
		return true, s
	case c.Kind == history.Acquire && a.Code == string(protocol.CodeGranted):
		if a.Pos.cmp(s.Pos) > 0 {
			return true, grantState{a.Pos, c.Holder}
		}
		return false, s // each acquire is its own request: never granted a position again
	case c.Kind == history.Release && a.Code == string(protocol.CodeReleased):
		return !zero && c.Pos == s.Pos, s
	}
	return true, s
}

// describeLeaseOp renders a lease request and its answer for the
// visualization.
func describeLeaseOp(input, output any) string {
	c, a := input.(leaseCall), output.(leaseAnswer)
	answer := a.Code
	switch {
	case a.Unknown:
		answer = "?"
	case a.Code == string(protocol.CodeGranted):
		answer = "granted " + a.Pos.String()
	}
	if c.Kind == history.Release {
		return fmt.Sprintf("release(%s %s) → %s", c.Holder, c.Pos, answer)
	}
	return fmt.Sprintf("acquire(%s) → %s", c.Holder, answer)
}

// leaseModel is the porcupine model of a domain's lease history; its
// partitions are the domains.
var leaseModel = porcupine.Model{
	Partition: partitionByDomain,
	Init:      func() any { return grantState{} },
	Step:      stepLease,
	Hash: func(state any) uint64 {
		s := state.(grantState)
		return s.Pos.Epoch*1_000_003 ^ s.Pos.Seq
	},
	DescribeOperation: describeLeaseOp,
	DescribeState: func(state any) string {
		s := state.(grantState)
		return fmt.Sprintf("highest grant %s (%s)", s.Pos, s.Holder)
	},
}

// partitionByDomain splits a lease history into its domains, in domain
// order.
func partitionByDomain(ops []porcupine.Operation) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	for _, o := range ops {
		d := o.Input.(leaseCall).Domain
		by[d] = append(by[d], o)
	}
	out := make([][]porcupine.Operation, 0, len(by))
	for _, d := range sortedKeys(by) {
		out = append(out, by[d])
	}
	return out
}

// leaseOperations turns the answered acquires and releases of ops into
// porcupine operations; clients numbers the procs.
//
// An unanswered request would end after everything (math.MaxInt64) with an
// unknown answer, legal in every state and changing none. Such a request
// can be placed anywhere in any linearization of the others, so leaving it
// out gives the same verdict; keeping it in makes porcupine's search of a
// failing history exponential in the number of unanswered requests (they
// overlap everything after them). They are left out, and shown as
// annotations in the visualization.
func leaseOperations(ops []history.Op, clients map[string]int) []porcupine.Operation {
	var out []porcupine.Operation
	for _, o := range ops {
		if (o.Kind != history.Acquire && o.Kind != history.Release) || !o.Answered() {
			continue
		}
		call := leaseCall{Domain: o.Domain, Kind: o.Kind, Holder: o.Holder}
		answer := leaseAnswer{Code: o.Code}
		if o.Kind == history.Release {
			call.Pos = opPos(o)
		} else {
			answer.Pos = opPos(o)
		}
		out = append(out, porcupine.Operation{ClientId: clients[o.Proc], Input: call, Call: o.Start,
			Output: answer, Return: max(o.End, o.Start), Metadata: describeOp(o)})
	}
	return out
}

// clientIDs numbers the procs of ops in name order, from 0.
func clientIDs(ops []history.Op) map[string]int {
	seen := map[string]int{}
	for _, o := range ops {
		seen[o.Proc] = 0
	}
	for i, p := range sortedKeys(seen) {
		seen[p] = i
	}
	return seen
}

// linearizeTimeout is in's porcupine bound per domain.
func linearizeTimeout(in Input) time.Duration {
	if in.LinearizeTimeout > 0 {
		return in.LinearizeTimeout
	}
	return DefaultLinearizeTimeout
}

// checkLinearizable is I1's linearizability: per domain, the acquires and
// releases with their answers are linearizable against stepLease. A search
// that times out is a note, not a violation.
func checkLinearizable(ix *index) ([]Violation, []string) {
	clients := clientIDs(ix.in.Ops)
	timeout := linearizeTimeout(ix.in)
	var vs []Violation
	var notes []string
	for _, d := range sortedKeys(ix.leaseOps) {
		ops := leaseOperations(ix.leaseOps[d], clients)
		if len(ops) == 0 {
			continue
		}
		res, info := porcupine.CheckOperationsVerbose(leaseModel, ops, timeout)
		switch res {
		case porcupine.Illegal:
			vs = append(vs, Violation{I1, fmt.Sprintf("domain %s: lease history not linearizable (porcupine, %d acquires and releases): "+
				"no order within the calls' intervals grants ever higher positions and answers released only to the latest grant; "+
				"first call that cannot be placed: %s", d, len(ops), unplaced(ops, info))})
		case porcupine.Unknown:
			notes = append(notes, fmt.Sprintf("domain %s: linearizability check of %d acquires and releases timed out after %s: no verdict",
				d, len(ops), timeout))
		}
	}
	return vs, notes
}

// unplaced describes the operation porcupine could not linearize: of those
// outside the longest partial linearization, the one that returned first.
func unplaced(ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	in := make([]bool, len(ops))
	for _, part := range info.PartialLinearizations() {
		var longest []int
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
		for _, id := range longest {
			in[id] = true
		}
	}
	best := -1
	for i, o := range ops {
		if !in[i] && (best < 0 || cmp.Or(cmp.Compare(o.Return, ops[best].Return), cmp.Compare(o.Call, ops[best].Call)) < 0) {
			best = i
		}
	}
	if best < 0 {
		return "unknown"
	}
	return ops[best].Metadata.(string)
}

// WriteLeaseVisualization writes porcupine's HTML visualization of in's
// lease history (every domain a partition; faults, losses and ends of
// holding as annotations) to path. It is meant for a schedule whose Report
// has an I1 violation, and shows the partial linearizations that fail.
func WriteLeaseVisualization(in Input, path string) error {
	clients := clientIDs(in.Ops)
	ops := leaseOperations(in.Ops, clients)
	_, info := porcupine.CheckOperationsVerbose(leaseModel, ops, linearizeTimeout(in))
	info.AddAnnotations(annotations(in, clients))
	if err := porcupine.VisualizePath(leaseModel, info, path); err != nil {
		return fmt.Errorf("lease visualization %s: %w", path, err)
	}
	return nil
}

// annotations are in's faults (tag "faults"), each proc's lost and held
// events, and its unanswered lease requests (until the last recorded
// instant), for the visualization.
func annotations(in Input, clients map[string]int) []porcupine.Annotation {
	last := lastInstant(in)
	var as []porcupine.Annotation
	for _, f := range in.Faults {
		as = append(as, porcupine.Annotation{Tag: "faults", Start: f.Start, End: max(f.End, f.Start),
			Description: f.Kind + " " + f.Target, Details: f.Detail, BackgroundColor: "#f4c7c3"})
	}
	for _, o := range in.Ops {
		switch {
		case o.Kind == history.Lost || o.Kind == history.Held:
			as = append(as, porcupine.Annotation{ClientId: clients[o.Proc], Start: o.Start, End: max(o.End, o.Start),
				Description: fmt.Sprintf("%s %s@%s", o.Kind, o.Domain, opPos(o)),
				Details:     fmt.Sprintf("valid until %s", fmtTime(o.ValidUntil))})
		case (o.Kind == history.Acquire || o.Kind == history.Release) && !o.Answered():
			as = append(as, porcupine.Annotation{ClientId: clients[o.Proc], Start: o.Start, End: max(last, o.Start),
				Description: fmt.Sprintf("%s %s (no answer)", o.Kind, o.Domain),
				Details:     describeOp(o), BackgroundColor: "#e0e0e0"})
		}
	}
	slices.SortStableFunc(as, func(a, b porcupine.Annotation) int { return cmp.Compare(a.Start, b.Start) })
	return as
}

// lastInstant is the latest start or end of in's ops and faults.
func lastInstant(in Input) int64 {
	var last int64
	for _, o := range in.Ops {
		last = max(last, o.Start, o.End)
	}
	for _, f := range in.Faults {
		last = max(last, f.Start, f.End)
	}
	return last
}
