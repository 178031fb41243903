package check

import (
	"fmt"
	"slices"
	"time"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/protocol"
)

// probeCalls holds the probe's first successful calls after the heal: per
// domain its earliest-ending granted acquire, per device its
// earliest-ending command answered ok.
type probeCalls struct {
	grant map[string]history.Op // domain → acquire
	ok    map[string]history.Op // device → command
}

// findProbeCalls collects the probe's calls that started at or after
// healed.
func findProbeCalls(ops []history.Op, healed int64) probeCalls {
	p := probeCalls{grant: map[string]history.Op{}, ok: map[string]history.Op{}}
	for _, o := range ops {
		if o.Proc != ProbeProc || o.Start < healed || !o.Answered() {
			continue
		}
		switch {
		case o.Kind == history.Acquire && o.Code == string(protocol.CodeGranted):
			keepEarliest(p.grant, o.Domain, o)
		case o.Kind == history.Command && o.Code == string(protocol.CodeOK):
			keepEarliest(p.ok, o.Device, o)
		}
	}
	return p
}

// keepEarliest stores o at m[k] unless an op ending earlier is there.
func keepEarliest(m map[string]history.Op, k string, o history.Op) {
	if cur, ok := m[k]; !ok || o.End < cur.End {
		m[k] = o
	}
}

// checkProgress is the progress rule: when Input.Healed is set, for every
// domain with devices the probe (ProbeProc) got, in calls started at or
// after Healed, a granted acquire of the domain and a command answered ok
// on each of its devices, each ending within ProgressBound of Healed (when
// the bound is set). It returns the longest of those times.
func checkProgress(ix *index) (time.Duration, []Violation) {
	in := ix.in
	if in.Healed == 0 {
		return 0, nil
	}
	devices := map[string][]string{} // domain → its devices, sorted
	for dev, d := range in.Domains {
		devices[d] = append(devices[d], dev)
	}
	calls := findProbeCalls(in.Ops, in.Healed)
	var longest time.Duration
	var vs []Violation
	for _, d := range sortedKeys(devices) {
		slices.Sort(devices[d])
		need := []required{{fmt.Sprintf("domain %s: a granted acquire", d), calls.grant, d}}
		for _, dev := range devices[d] {
			need = append(need, required{fmt.Sprintf("domain %s: a command answered ok on device %s", d, dev), calls.ok, dev})
		}
		for _, r := range need {
			took, v, ok := r.check(in)
			longest = max(longest, took)
			if !ok {
				vs = append(vs, v)
			}
		}
	}
	return longest, vs
}

// required is one call the progress rule needs of the probe.
type required struct {
	what string
	in   map[string]history.Op
	key  string
}

// check returns how long after the heal the call ended, and a violation if
// it is missing or late.
func (r required) check(in Input) (time.Duration, Violation, bool) {
	o, found := r.in[r.key]
	if !found {
		return 0, Violation{Progress, fmt.Sprintf("%s: the probe got none in calls started at or after the heal at %s",
			r.what, fmtTime(in.Healed))}, false
	}
	took := time.Duration(o.End - in.Healed)
	if in.ProgressBound > 0 && took > in.ProgressBound {
		return took, Violation{Progress, fmt.Sprintf("%s: the probe's first one ended %s after the heal at %s, over the bound %s: %s",
			r.what, took, fmtTime(in.Healed), in.ProgressBound, describeOp(o))}, false
	}
	return took, Violation{}, true
}
