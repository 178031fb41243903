package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/benchline"
)

// TestPrintsEveryFigure runs the whole command on a 1-member cluster with
// short measurements and wants one JSON line per domain count, each with a
// measured value and baseline.
func TestPrintsEveryFigure(t *testing.T) {
	var out bytes.Buffer
	cfg := config{d: 200 * time.Millisecond, runs: 1, members: 1, dir: t.TempDir(),
		out: &benchline.Printer{Out: &out, JSON: true}}
	if err := run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	var lines []benchline.Line
	for s := range strings.Lines(out.String()) {
		var l benchline.Line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("line %q: %v", s, err)
		}
		lines = append(lines, l)
	}
	if len(lines) != len(domainCounts) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(domainCounts), out.String())
	}
	for _, l := range lines {
		if l.Value <= 0 || l.Baseline <= 0 || l.Ratio <= 0 || l.Goal == "" {
			t.Errorf("line without a measured figure: %+v", l)
		}
	}
}

// TestFatalBecomesError: a Fatal inside the work is the command's error,
// and the cleanups registered before it still run.
func TestFatalBecomesError(t *testing.T) {
	r, err := newRunner(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cleaned := false
	err = r.do(func() error {
		r.Cleanup(func() { cleaned = true })
		r.Fatalf("member %s did not start", "m0")
		return nil
	})
	r.close()
	if err == nil || err.Error() != "member m0 did not start" || !cleaned {
		t.Fatalf("err = %v, cleaned = %v", err, cleaned)
	}
}
