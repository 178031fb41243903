package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/benchline"
)

// TestGrantLines measures the controller's grants once, quickly, and wants
// a line per domain count with a measured value and raw-fsync baseline.
func TestGrantLines(t *testing.T) {
	var out bytes.Buffer
	s := &suite{cfg: goalsConfig{quick: true, runs: 1, out: &benchline.Printer{Out: &out, JSON: true}}, dir: t.TempDir()}
	if err := s.measureGrants(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(grantDomains) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(grantDomains), out.String())
	}
	for _, raw := range lines {
		var l benchline.Line
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatal(err)
		}
		if l.Value <= 0 || l.Baseline <= 0 || !strings.Contains(l.Name, "controller grants") {
			t.Errorf("line without a measured figure: %+v", l)
		}
	}
}
