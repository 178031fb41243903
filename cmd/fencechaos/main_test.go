package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// Bad flags are refused, naming the flag and its value.
func TestParseArgsRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--schedules 0", "--schedules 0"},
		{"--duration 1s", "--duration 1s"},
		{"--parallel 0", "--parallel 0"},
		{"--broker nats", `--broker "nats"`},
		{"--store redis", `--store "redis"`},
		{"--seed x", "invalid value"},
		{"extra", `unexpected argument "extra"`},
		{"--store etcd --etcd /nonexistent/etcd", "--store etcd"},
	} {
		t.Run(tc.args, func(t *testing.T) {
			_, err := parseArgs(strings.Fields(tc.args), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseArgs(%s) = %v, want an error containing %q", tc.args, err, tc.want)
			}
		})
	}
}

// The defaults are the documented ones; a zero seed draws one; --out is
// made absolute (the replay command and child processes use it).
func TestParseArgsDefaults(t *testing.T) {
	o, err := parseArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Schedules != 10 || o.Duration != 20*time.Second || o.Parallel != 1 || o.Broker != "embedded" || o.Store != "bbolt" {
		t.Fatalf("defaults = %+v", o)
	}
	if o.Seed == 0 || !strings.HasPrefix(o.Out, "/") || o.Self == "" {
		t.Fatalf("seed %d, out %q, self %q: want a drawn seed, an absolute out dir and this binary", o.Seed, o.Out, o.Self)
	}
	o, err = parseArgs(strings.Fields("--seed 77 --schedules 3 --duration 5s --parallel 2"), io.Discard)
	if err != nil || o.Seed != 77 || o.Schedules != 3 || o.Duration != 5*time.Second || o.Parallel != 2 {
		t.Fatalf("parsed %+v, %v", o, err)
	}
}

// --power-loss takes only --cuts, --seed and --out.
func TestParseArgsPowerLoss(t *testing.T) {
	c, err := parseArgs(strings.Fields("--power-loss --cuts 5 --seed 3 --out x"), io.Discard)
	if err != nil || c.powerLoss == nil || c.powerLoss.Cuts != 5 || c.powerLoss.Seed != 3 || !strings.HasPrefix(c.powerLoss.Out, "/") {
		t.Fatalf("parsed %+v, %v", c.powerLoss, err)
	}
	for _, args := range []string{"--power-loss --schedules 3", "--power-loss --cuts 0", "--power-loss --broker mosquitto"} {
		if _, err := parseArgs(strings.Fields(args), io.Discard); err == nil {
			t.Errorf("parseArgs(%s) = nil error, want a refusal", args)
		}
	}
}
