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

// TestSoakChildSamplesUnderLoad runs the soak's child part briefly and
// wants a sample per interval, each with an RSS, and commands answered
// between the first sample and the last.
func TestSoakChildSamplesUnderLoad(t *testing.T) {
	var out bytes.Buffer
	cfg := soakConfig{dir: t.TempDir(), length: 3 * time.Second, every: 500 * time.Millisecond, devices: 4}
	if err := soakChild(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	samples, err := readSamples(strings.NewReader(out.String()), soakConfig{out: &benchline.Printer{Out: &bytes.Buffer{}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) < 4 {
		t.Fatalf("%d samples in 3 s at 0.5 s intervals:\n%s", len(samples), out.String())
	}
	for _, s := range samples {
		if s.RSS <= 1 || s.Anon <= 0 || s.Anon > s.RSS {
			t.Errorf("sample without a plausible RSS: %+v", s)
		}
	}
	if first, last := samples[0], samples[len(samples)-1]; last.Commands <= first.Commands {
		t.Errorf("no commands answered between the first sample (%d) and the last (%d)", first.Commands, last.Commands)
	}
}

// TestSoakFlatnessJudgesTheWarmedUpRSS: the end is compared with the first
// sample at or after a fifth of the length, not with the cold start.
func TestSoakFlatnessJudgesTheWarmedUpRSS(t *testing.T) {
	samples := []sample{{Seconds: 30, RSS: 20}, {Seconds: 120, RSS: 40}, {Seconds: 300, RSS: 42}, {Seconds: 600, RSS: 43}}
	tests := []struct {
		name    string
		samples []sample
		met     bool
	}{
		{"flat after warm-up", samples, true},
		{"growing", append(samples[:3:3], sample{Seconds: 600, RSS: 50}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			cfg := soakConfig{length: 10 * time.Minute, devices: 100, out: &benchline.Printer{Out: &out, JSON: true}}
			if err := printFlatness(cfg, tc.samples); err != nil {
				t.Fatal(err)
			}
			var l benchline.Line
			if err := json.Unmarshal(out.Bytes(), &l); err != nil {
				t.Fatal(err)
			}
			if l.Baseline != 40 || l.Met != tc.met {
				t.Fatalf("line %+v: want baseline 40 (the sample at 120 s), met %v", l, tc.met)
			}
		})
	}
}
