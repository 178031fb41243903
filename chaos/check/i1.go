package check

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/protocol"
)

// checkI1 runs the real-time rules of I1 on every domain (the
// linearizability rule is checkLinearizable).
func checkI1(ix *index) []Violation {
	var vs []Violation
	for _, d := range sortedKeys(ix.leaseOps) {
		ops := ix.leaseOps[d]
		gs := grants(ops)
		vs = append(vs, checkGrantOrder(d, gs)...)
		vs = append(vs, checkSharedPositions(d, gs)...)
		vs = append(vs, checkOneHolder(d, gs, validityEnds(ops), ix.in.ClockSlack.Nanoseconds())...)
	}
	return vs
}

// grants returns the acquires of ops answered granted.
func grants(ops []history.Op) []history.Op {
	var gs []history.Op
	for _, o := range ops {
		if o.Kind == history.Acquire && o.Answered() && o.Code == string(protocol.CodeGranted) {
			gs = append(gs, o)
		}
	}
	return gs
}

// checkGrantOrder is I1's real-time order: a grant B that started after a
// grant A ended has a position above A's. (Each acquire op is one call
// with its own request id — the SDK's resends stay inside the op — so two
// ops are never one grant.) Each B is compared with the highest grant ended
// before it started.
func checkGrantOrder(domain string, gs []history.Op) []Violation {
	byStart := slices.Clone(gs)
	slices.SortStableFunc(byStart, func(a, b history.Op) int { return cmp.Compare(a.Start, b.Start) })
	byEnd := slices.Clone(gs)
	slices.SortStableFunc(byEnd, func(a, b history.Op) int { return cmp.Compare(a.End, b.End) })
	var vs []Violation
	var best *history.Op // highest grant ended before the current start
	j := 0
	for _, b := range byStart {
		for ; j < len(byEnd) && byEnd[j].End < b.Start; j++ {
			if best == nil || opPos(byEnd[j]).cmp(opPos(*best)) > 0 {
				best = &byEnd[j]
			}
		}
		if best != nil && opPos(b).cmp(opPos(*best)) <= 0 {
			vs = append(vs, Violation{I1, fmt.Sprintf("domain %s: grant not above an earlier one: %s started after %s ended",
				domain, describeOp(b), describeOp(*best))})
		}
	}
	return vs
}

// checkSharedPositions is I1's uniqueness: no two acquire ops are granted
// one position (each op is its own request).
func checkSharedPositions(domain string, gs []history.Op) []Violation {
	at := map[position][]history.Op{}
	for _, g := range gs {
		at[opPos(g)] = append(at[opPos(g)], g)
	}
	var vs []Violation
	for _, p := range slices.SortedFunc(maps.Keys(at), position.cmp) {
		os := at[p]
		if len(os) < 2 {
			continue
		}
		descs := make([]string, len(os))
		for i, o := range os {
			descs[i] = describeOp(o)
		}
		slices.Sort(descs)
		vs = append(vs, Violation{I1, fmt.Sprintf("domain %s: position %s granted to more than one acquire: %s",
			domain, p, strings.Join(descs, "; "))})
	}
	return vs
}

// validity is until when a holder treated one lease as valid, and the op
// that says so.
type validity struct {
	pos    position
	holder string
	end    int64
	op     history.Op
}

// validityEnds returns, per lease of ops, the earliest end of validity its
// holder recorded: the ValidUntil of a Lost or Held op, and for a Release
// the earlier of its ValidUntil and its Start (the holder stops using a
// lease it releases). A Lost or Held op without a ValidUntil says nothing.
// The result is sorted by position.
func validityEnds(ops []history.Op) []validity {
	ends := map[position]validity{}
	for _, o := range ops {
		v, ok := validityEnd(o)
		if !ok {
			continue
		}
		if cur, seen := ends[v.pos]; !seen || v.end < cur.end {
			ends[v.pos] = v
		}
	}
	out := make([]validity, 0, len(ends))
	for _, p := range slices.SortedFunc(maps.Keys(ends), position.cmp) {
		out = append(out, ends[p])
	}
	return out
}

// validityEnd is the validity end o records, if it records one.
func validityEnd(o history.Op) (validity, bool) {
	v := validity{pos: opPos(o), holder: o.Holder, end: o.ValidUntil, op: o}
	switch o.Kind {
	case history.Release:
		if v.end == 0 || o.Start < v.end {
			v.end = o.Start
		}
		return v, true
	case history.Lost, history.Held:
		return v, v.end != 0
	}
	return validity{}, false
}

// latestTwo keeps the validity with the latest end and the latest of
// another holder, so the latest of a holder other than any given one is at
// hand.
type latestTwo struct{ first, second *validity }

// add considers v.
func (l *latestTwo) add(v *validity) {
	switch {
	case l.first == nil || v.end > l.first.end:
		if l.first != nil && l.first.holder != v.holder {
			l.second = l.first
		}
		l.first = v
	case v.holder != l.first.holder && (l.second == nil || v.end > l.second.end):
		l.second = v
	}
}

// otherThan is the latest validity of a holder other than holder, or nil.
func (l *latestTwo) otherThan(holder string) *validity {
	if l.first != nil && l.first.holder != holder {
		return l.first
	}
	return l.second
}

// checkOneHolder is I1's one holder at a time, from the holders' own view:
// for leases A (position p) and B (position q > p) of different holders,
// A's validity end is no later than the end of B's granted acquire plus
// slack (ns). The controller grants B only after A's TTL ran out, and the
// SDK's validity is conservative, so the holders never overlap. Leases of
// one holder may overlap: that is not two holders.
func checkOneHolder(domain string, gs []history.Op, ends []validity, slack int64) []Violation {
	byPos := slices.Clone(gs)
	slices.SortStableFunc(byPos, func(a, b history.Op) int { return opPos(a).cmp(opPos(b)) })
	var vs []Violation
	var latest latestTwo
	j := 0
	for _, b := range byPos {
		for ; j < len(ends) && ends[j].pos.cmp(opPos(b)) < 0; j++ {
			latest.add(&ends[j])
		}
		a := latest.otherThan(b.Holder)
		if a == nil || a.end <= b.End+slack {
			continue
		}
		vs = append(vs, Violation{I1, fmt.Sprintf("domain %s: two holders at once: lease %s of %s valid until %s (by %s), but %s (slack %dns)",
			domain, a.pos, a.holder, fmtTime(a.end), describeOp(a.op), describeOp(b), slack)})
	}
	return vs
}
