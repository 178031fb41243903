package benchline

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want float64
	}{
		{"none", nil, 0},
		{"odd", []float64{5, 1, 3}, 3},
		{"even", []float64{4, 1, 3, 2}, 2.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Median(tc.in); got != tc.want {
				t.Fatalf("Median(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestGoalsJudgeTheRatio(t *testing.T) {
	tests := []struct {
		name string
		l    Line
		want bool
	}{
		{"at least, met", Line{Value: 60, Baseline: 100}.AtLeast(0.5), true},
		{"at least, missed", Line{Value: 40, Baseline: 100}.AtLeast(0.5), false},
		{"at most, met", Line{Value: 1.1, Baseline: 1}.AtMost(1.2), true},
		{"at most, missed", Line{Value: 1.3, Baseline: 1}.AtMost(1.2), false},
		{"no baseline is never met", Line{Value: 1, Baseline: 0}.AtMost(1.2), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.l.Met != tc.want {
				t.Fatalf("%+v: met %v, want %v", tc.l, tc.l.Met, tc.want)
			}
		})
	}
}

func TestJSONLineHasEveryField(t *testing.T) {
	var buf bytes.Buffer
	p := &Printer{Out: &buf, JSON: true}
	if err := p.Print(Line{Name: "x", Value: 2, Unit: "ms", Baseline: 4, BaseName: "b", Runs: 3}.AtMost(1)); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("%q: %v", buf.String(), err)
	}
	for _, k := range []string{"name", "value", "unit", "baseline", "ratio", "goal", "met"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON line %s lacks %q", buf.String(), k)
		}
	}
	if m["met"] != true || m["ratio"] != 0.5 {
		t.Errorf("JSON line %s: want met true, ratio 0.5", buf.String())
	}
}
