package check

import (
	"maps"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/devices/sim"
)

// statsInput is a small schedule with one I4 violation (c3 acknowledged,
// never applied).
func statsInput() Input {
	return Input{Domains: twoDevices, DoubtFaults: doubtKinds,
		Ops: []history.Op{
			grant("sup1", "d1", 1, 1, 0, 1),
			acquire("sup2", "d1", "held", 0, 0, 2, 3),
			acquire("sup2", "d1", "", 0, 0, 4, -1),
			command("sup1", "fw1", "c1", "d1", 1, 1, "ok", 5, 8),
			command("sup1", "fw2", "c2", "d1", 1, 1, "busy", 9, 10),
			command("sup1", "fw2", "c3", "d1", 1, 1, "ok", 11, 12),
			command("sup1", "fw2", "c4", "d1", 1, 1, "", 13, -1),
			release("sup1", "d1", "released", 1, 1, 20, 21, 30),
			event(history.Held, "sup2", "d1", 1, 1, 40, 41),
		},
		Applies: []sim.Entry{apply("fw1", "c1", "d1", "sup1", 1, 1, 6, 7)},
		Faults:  []history.Fault{fault("kill-agent", "agent1", 14, 14), fault("partition", "sup2", 4, 6), fault("kill-agent", "agent2", 15, 15)},
	}
}

// Check counts the schedule: commands and their answers, applies, lease
// calls and answers, faults by kind, violations by invariant.
func TestStatsCounts(t *testing.T) {
	st := Check(statsInput()).Stats
	if st.Schedules != 1 || st.Commands != 4 || st.Applies != 1 || st.Acquires != 3 || st.Grants != 1 || st.Releases != 1 {
		t.Errorf("counts %+v", st)
	}
	want := map[string]map[string]int{
		"Codes":      {"ok": 2, "busy": 1, NoAnswer: 1},
		"LeaseCodes": {"granted": 1, "held": 1, NoAnswer: 1, "released": 1},
		"Faults":     {"kill-agent": 2, "partition": 1},
		"Violations": {I4: 1},
	}
	got := map[string]map[string]int{"Codes": st.Codes, "LeaseCodes": st.LeaseCodes, "Faults": st.Faults, "Violations": st.Violations}
	for k, w := range want {
		if !maps.Equal(got[k], w) {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
}

// Add totals schedules, starting from the zero Stats.
func TestStatsAdd(t *testing.T) {
	one := Check(statsInput()).Stats
	var total Stats
	total.Add(one)
	total.Add(one)
	if total.Schedules != 2 || total.Commands != 8 || total.Applies != 2 || total.Acquires != 6 || total.Grants != 2 ||
		total.Releases != 2 || total.Codes["ok"] != 4 || total.LeaseCodes[NoAnswer] != 2 || total.Faults["kill-agent"] != 4 ||
		total.Violations[I4] != 2 {
		t.Errorf("total %+v", total)
	}
	if one.Codes["ok"] != 2 {
		t.Errorf("Add changed its argument: %v", one.Codes)
	}
}

// Table shows every row the CLI needs, counts right-aligned, and every
// invariant even at zero.
func TestStatsTable(t *testing.T) {
	var total Stats
	total.Add(Check(statsInput()).Stats)
	total.Add(Check(statsInput()).Stats)
	table := total.Table()
	t.Log("\n" + table)
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	want := []string{"schedules 2", "faults 6", "  kill-agent 4", "  partition 2", "commands 8", "applies 2",
		"answers by code 8", "  " + NoAnswer + " 2", "  busy 2", "  ok 4",
		"acquires 6", "grants 2", "releases 2", "lease answers by code 8",
		"  " + NoAnswer + " 2", "  granted 2", "  held 2", "  released 2",
		"violations 2", "  I1 0", "  I2 0", "  I4 2", "  progress 0"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), table)
	}
	width := len(lines[0])
	for i, l := range lines {
		name, n := strings.TrimRight(l[:strings.LastIndex(strings.TrimRight(l, " "), " ")], " "), strings.TrimSpace(l[strings.LastIndex(l, " "):])
		if name+" "+n != want[i] {
			t.Errorf("line %d = %q, want %q", i, l, want[i])
		}
		if len(l) != width {
			t.Errorf("line %d %q not aligned to width %d", i, l, width)
		}
	}
}
