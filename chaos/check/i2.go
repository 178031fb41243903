package check

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/protocol"
)

// durableCodes are the command answers the agent gives only after it made
// the command's token durable.
var durableCodes = map[string]bool{
	string(protocol.CodeOK): true, string(protocol.CodeInDoubt): true,
	string(protocol.CodeDeviceError): true, string(protocol.CodeDeviceTimeout): true,
	string(protocol.CodeDeviceUnavailable): true, // a driver's answer: the agent accepts first
}

// checkI2 runs the rules of I2.
func checkI2(ix *index) []Violation {
	var vs []Violation
	for _, dev := range sortedKeys(ix.byDevice) {
		vs = append(vs, checkDeviceOrder(dev, ix.byDevice[dev])...)
	}
	for _, d := range sortedKeys(ix.byDomain) {
		vs = append(vs, checkStaleApply(d, ix.byDomain[d], ix.commands[d], int64(ix.driverSlack))...)
		vs = append(vs, checkAfterLost(d, ix.byDomain[d], ix.leaseOps[d], ix.driverSlack)...)
	}
	return vs
}

// checkDeviceOrder is I2 on one device's log (sim.CheckLog's token rule):
// in log order, the positions of one domain never go backwards; an equal
// position (the same lease) is fine. Every backwards entry is reported,
// against the highest entry before it.
func checkDeviceOrder(device string, log []entry) []Violation {
	highest := map[string]entry{} // domain → highest entry so far
	var vs []Violation
	for _, e := range log {
		h, ok := highest[e.Domain]
		switch {
		case !ok || entryPos(e.Entry).cmp(entryPos(h.Entry)) > 0:
			highest[e.Domain] = e
		case entryPos(e.Entry).cmp(entryPos(h.Entry)) < 0:
			vs = append(vs, Violation{I2, fmt.Sprintf("device %s: token went backwards: %s after %s",
				device, e.describe(), h.describe())})
		}
	}
	return vs
}

// durable is a moment the agent had provably made a position durable: an
// entry (when its device took it: I3 makes the position durable before the
// driver sees the command), a command answered with a durable code (at its
// End), or a stale_token answer (the fence it showed, at its End).
type durable struct {
	pos  position
	at   int64
	what string
}

// durableMoments lists the domain's durable moments from its entries and
// command ops, sorted by time.
func durableMoments(entries []entry, cmds []history.Op) []durable {
	ds := make([]durable, 0, len(entries))
	for _, e := range entries {
		ds = append(ds, durable{entryPos(e.Entry), e.started, "applied as " + e.describe()})
	}
	for _, o := range cmds {
		switch {
		case o.Answered() && durableCodes[o.Code]:
			ds = append(ds, durable{opPos(o), o.End, "answered to " + describeOp(o)})
		case o.Answered() && o.Code == string(protocol.CodeStaleToken) && (o.FenceEpoch != 0 || o.FenceSeq != 0):
			ds = append(ds, durable{position{o.FenceEpoch, o.FenceSeq}, o.End, "the fence shown to " + describeOp(o)})
		}
	}
	slices.SortStableFunc(ds, func(a, b durable) int { return cmp.Compare(a.at, b.at) })
	return ds
}

// checkStaleApply is I2's core rule, across all devices of a domain: an
// entry at position p that reached its device at s (entry.reach: when the
// device took it, or its send when a line fault may have held it) is stale
// if a position q > p was provably durable at the agent before s — an
// entry at q (any device) applied before s, or a command at q answered ok,
// in_doubt, device_error or device_timeout before s. Each stale entry is
// reported against the highest such position.
func checkStaleApply(domain string, entries []entry, cmds []history.Op, slack int64) []Violation {
	ds := durableMoments(entries, cmds)
	byStart := slices.Clone(entries)
	slices.SortStableFunc(byStart, func(a, b entry) int { return cmp.Compare(a.reach, b.reach) })
	var vs []Violation
	var best *durable
	j := 0
	for _, e := range byStart {
		for ; j < len(ds) && ds[j].at+slack < e.reach; j++ {
			if best == nil || ds[j].pos.cmp(best.pos) > 0 {
				best = &ds[j]
			}
		}
		if best != nil && best.pos.cmp(entryPos(e.Entry)) > 0 {
			vs = append(vs, Violation{I2, fmt.Sprintf("domain %s: stale apply: %s, but %s@%s was durable at the agent at %s (%s)",
				domain, e.describe(), domain, best.pos, fmtTime(best.at), best.what)})
		}
	}
	return vs
}

// firstNewer answers, for a position p, the earliest-applied entry of the
// domain at a position above p.
type firstNewer struct {
	pos      []position // distinct positions, ascending
	earliest []entry    // earliest-applied entry at a position ≥ pos[i]
}

// newFirstNewer indexes entries.
func newFirstNewer(entries []entry) firstNewer {
	byPos := slices.Clone(entries)
	slices.SortStableFunc(byPos, func(a, b entry) int {
		return cmp.Or(entryPos(a.Entry).cmp(entryPos(b.Entry)), cmp.Compare(a.started, b.started))
	})
	var f firstNewer
	for _, e := range byPos {
		if n := len(f.pos); n == 0 || f.pos[n-1] != entryPos(e.Entry) {
			f.pos = append(f.pos, entryPos(e.Entry))
			f.earliest = append(f.earliest, e)
		}
	}
	for i := len(f.earliest) - 2; i >= 0; i-- {
		if f.earliest[i+1].started < f.earliest[i].started {
			f.earliest[i] = f.earliest[i+1]
		}
	}
	return f
}

// after returns the earliest-applied entry at a position above p.
func (f firstNewer) after(p position) (entry, bool) {
	i, found := slices.BinarySearchFunc(f.pos, p, position.cmp)
	if found {
		i++
	}
	if i >= len(f.pos) {
		return entry{}, false
	}
	return f.earliest[i], true
}

// checkAfterLost is I2 for a holder told its lease was lost: for a Lost op
// at position p (reported at tl) and the first entry of the domain above p
// (taken by its device at ta), no entry at p reaches its device (entry.reach) after
// max(tl, ta).
func checkAfterLost(domain string, entries []entry, leaseOps []history.Op, slack time.Duration) []Violation {
	lost := map[position]history.Op{} // earliest Lost op per position
	for _, o := range leaseOps {
		if o.Kind != history.Lost {
			continue
		}
		if cur, ok := lost[opPos(o)]; !ok || lostAt(o) < lostAt(cur) {
			lost[opPos(o)] = o
		}
	}
	if len(lost) == 0 {
		return nil
	}
	newer := newFirstNewer(entries)
	var vs []Violation
	for _, e := range entries {
		l, ok := lost[entryPos(e.Entry)]
		if !ok {
			continue
		}
		n, ok := newer.after(entryPos(e.Entry))
		if !ok || e.reach <= max(lostAt(l), n.started)+int64(slack) {
			continue
		}
		vs = append(vs, Violation{I2, fmt.Sprintf("domain %s: applied after the lease was lost and a newer token applied: %s; "+
			"its holder was told the lease was lost at %s (%s) and %s",
			domain, e.describe(), fmtTime(lostAt(l)), describeOp(l), n.describe())})
	}
	return vs
}

// lostAt is when a Lost op was reported.
func lostAt(o history.Op) int64 { return cmp.Or(o.End, o.Start) }
