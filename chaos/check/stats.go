package check

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/protocol"
)

// NoAnswer is the code Stats counts a call without an answer under.
const NoAnswer = "(none)"

// Invariants lists the invariants a Violation may name, in report order.
var Invariants = []string{I1, I2, I4, Progress}

// Stats counts what happened in one or more schedules.
type Stats struct {
	Schedules  int            // schedules checked (1 from Check)
	Commands   int            // command ops sent
	Codes      map[string]int // command answers by code (NoAnswer: none)
	Applies    int            // apply-log entries
	Acquires   int            // acquire ops
	Grants     int            // acquires answered granted
	Releases   int            // release ops
	LeaseCodes map[string]int // acquire and release answers by code
	Faults     map[string]int // injected faults by kind
	Violations map[string]int // violations by invariant
}

// Add adds o's counts to s.
func (s *Stats) Add(o Stats) {
	s.Schedules += o.Schedules
	s.Commands += o.Commands
	s.Applies += o.Applies
	s.Acquires += o.Acquires
	s.Grants += o.Grants
	s.Releases += o.Releases
	s.Codes = addCounts(s.Codes, o.Codes)
	s.LeaseCodes = addCounts(s.LeaseCodes, o.LeaseCodes)
	s.Faults = addCounts(s.Faults, o.Faults)
	s.Violations = addCounts(s.Violations, o.Violations)
}

// addCounts adds b into a (allocating a if needed) and returns a.
func addCounts(a, b map[string]int) map[string]int {
	if a == nil {
		a = map[string]int{}
	}
	for k, n := range b {
		a[k] += n
	}
	return a
}

// collectStats counts in's records and the violations found.
func collectStats(in Input, vs []Violation) Stats {
	s := Stats{Schedules: 1, Applies: len(in.Applies), Codes: map[string]int{}, LeaseCodes: map[string]int{},
		Faults: map[string]int{}, Violations: map[string]int{}}
	for _, o := range in.Ops {
		countOp(&s, o)
	}
	for _, f := range in.Faults {
		s.Faults[f.Kind]++
	}
	for _, v := range vs {
		s.Violations[v.Invariant]++
	}
	return s
}

// countOp counts one op.
func countOp(s *Stats, o history.Op) {
	code := o.Code
	if !o.Answered() {
		code = NoAnswer
	}
	switch o.Kind {
	case history.Command:
		s.Commands++
		s.Codes[code]++
	case history.Acquire:
		s.Acquires++
		s.LeaseCodes[code]++
		if code == string(protocol.CodeGranted) {
			s.Grants++
		}
	case history.Release:
		s.Releases++
		s.LeaseCodes[code]++
	}
}

// Table renders s as a plain-text table for the CLI's final output: rows
// for schedules, faults by kind, commands, applies, command answers by
// code, acquires, grants, releases, lease answers by code, and violations
// by invariant (every invariant, zero or not).
func (s Stats) Table() string {
	var rows [][2]string
	row := func(name string, n int) { rows = append(rows, [2]string{name, strconv.Itoa(n)}) }
	row("schedules", s.Schedules)
	row("faults", sum(s.Faults))
	for _, k := range sortedKeys(s.Faults) {
		row("  "+k, s.Faults[k])
	}
	row("commands", s.Commands)
	row("applies", s.Applies)
	row("answers by code", sum(s.Codes))
	for _, k := range sortedKeys(s.Codes) {
		row("  "+k, s.Codes[k])
	}
	row("acquires", s.Acquires)
	row("grants", s.Grants)
	row("releases", s.Releases)
	row("lease answers by code", sum(s.LeaseCodes))
	for _, k := range sortedKeys(s.LeaseCodes) {
		row("  "+k, s.LeaseCodes[k])
	}
	row("violations", sum(s.Violations))
	for _, k := range invariantRows(s.Violations) {
		row("  "+k, s.Violations[k])
	}
	return renderRows(rows)
}

// renderRows lays rows out as a name column, left-aligned, and a count
// column, right-aligned.
func renderRows(rows [][2]string) string {
	nameW, numW := 0, 0
	for _, r := range rows {
		nameW, numW = max(nameW, len(r[0])), max(numW, len(r[1]))
	}
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%-*s  %*s\n", nameW, r[0], numW, r[1])
	}
	return b.String()
}

// invariantRows are Invariants followed by any other invariant counted.
func invariantRows(v map[string]int) []string {
	rows := append([]string(nil), Invariants...)
	others := maps.Clone(v)
	for _, k := range Invariants {
		delete(others, k)
	}
	return append(rows, sortedKeys(others)...)
}

// sum adds m's counts.
func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
