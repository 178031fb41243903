package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fencegate/fencegate/internal/benchagent"
	"github.com/fencegate/fencegate/internal/benchline"
	"github.com/fencegate/fencegate/internal/benchload"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// goalsConfig is the goal suite's part of the flags.
type goalsConfig struct {
	dir     string // parent of the scratch directory
	quick   bool   // fewer commands per measurement: the whole suite in minutes
	runs    int    // measurements per figure; the median is printed
	devices []int  // agent device counts, ascending; 100 is the scaling reference
	// agentOnly stops after the agent's lines: no grants, no RSS children.
	agentOnly bool
	out       *benchline.Printer
}

// mode names one kind of measurement at a device count.
type mode string

const (
	bare      mode = "bare"      // echo responder, same concurrency
	steady    mode = "steady"    // one token per device
	advancing mode = "advancing" // a new token on every command
	commit    mode = "commit"    // one bbolt Update (fdatasync), 1 device
)

// stats collects one figure's runs.
type stats struct{ rate, p50, p99 []float64 }

func (s *stats) add(r benchload.Result) {
	s.rate = append(s.rate, r.Rate())
	s.p50 = append(s.p50, msOf(r.Percentile(0.5)))
	s.p99 = append(s.p99, msOf(r.Percentile(0.99)))
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type key struct {
	devices int
	mode    mode
}

// suite holds the broker, the baseline responder and every figure so far.
type suite struct {
	cfg    goalsConfig
	dir    string
	broker *mqtt.Embedded
	echo   *benchagent.Echo
	tokens *benchload.Tokens
	res    map[key]*stats
}

// runGoals measures every figure of the goals, with the baselines
// in the same run, and prints each line as soon as it can be computed.
func runGoals(ctx context.Context, cfg goalsConfig) (err error) {
	s := &suite{cfg: cfg, res: map[key]*stats{}}
	if s.dir, err = os.MkdirTemp(cfg.dir, "fencebench-"); err != nil {
		return fmt.Errorf("scratch directory: %w", err)
	}
	defer func() { err = errors.Join(err, os.RemoveAll(s.dir)) }()
	if s.tokens, err = benchload.NewTokens(); err != nil {
		return err
	}
	if s.broker, err = mqtt.StartEmbedded("127.0.0.1:0", nil); err != nil {
		return err
	}
	defer s.broker.Close()
	if s.echo, err = benchagent.StartEcho(s.broker.URL()); err != nil {
		return err
	}
	defer s.echo.Close()
	for _, n := range cfg.devices {
		if err := s.measure(ctx, n); err != nil {
			return fmt.Errorf("devices=%d: %w", n, err)
		}
		if err := s.printDevices(n); err != nil {
			return err
		}
	}
	if cfg.agentOnly {
		return nil
	}
	if err := s.measureGrants(ctx); err != nil {
		return err
	}
	return s.measureRSS(ctx)
}

// ops is the number of commands of one measurement at n devices.
func (s *suite) ops(n int) int {
	switch {
	case n == 1 && s.cfg.quick:
		return 600
	case n == 1:
		return 3000
	case s.cfg.quick:
		return 4000 // about a second a run: shorter runs scattered by ±25 % here
	}
	return 10000
}

// inFlight is the concurrency at n devices: one per device up to 100.
func inFlight(n int) int { return min(n, 100) }

func (s *suite) stats(n int, m mode) *stats {
	k := key{n, m}
	if s.res[k] == nil {
		s.res[k] = &stats{}
	}
	return s.res[k]
}

// measure starts an agent with n devices, warms every device up with one
// command, then runs the bare baseline, the steady and the advancing load
// in turn, cfg.runs times.
func (s *suite) measure(ctx context.Context, n int) (err error) {
	dir := filepath.Join(s.dir, fmt.Sprintf("agent-%d", n))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	a, err := benchagent.StartAgent(dir, s.broker.URL(), n, s.tokens.PublicKey())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, a.Stop()) }()
	load := benchagent.Load{Broker: s.broker.URL(), Tokens: s.tokens, InFlight: inFlight(n)}
	if _, err := a.Commands(ctx, withOps(load, n, false)); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	for range s.cfg.runs {
		if err := s.measureRun(ctx, a, load, n); err != nil {
			return err
		}
	}
	return nil
}

func withOps(l benchagent.Load, ops int, adv bool) benchagent.Load {
	l.Limit, l.Advancing = benchload.Limit{Ops: ops}, adv
	return l
}

func (s *suite) measureRun(ctx context.Context, a *benchagent.Agent, load benchagent.Load, n int) error {
	ops := s.ops(n)
	r, err := s.echo.RoundTrips(ctx, withOps(load, ops, false))
	if err != nil {
		return fmt.Errorf("bare round trips: %w", err)
	}
	s.stats(n, bare).add(r)
	for _, m := range []mode{steady, advancing} {
		r, err := a.Commands(ctx, withOps(load, ops, m == advancing))
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		s.stats(n, m).add(r)
	}
	if n == 1 {
		return s.measureCommit(ctx)
	}
	return nil
}

// measureCommit times one durable bbolt Update (one fdatasync'd commit of
// a journal-sized record), the unit of the lone command's baseline.
func (s *suite) measureCommit(ctx context.Context) (err error) {
	path := filepath.Join(s.dir, "commit.db")
	l, err := benchload.OpenBoltLoad(path, 1, false, benchload.RecordValue(s.tokens.At(0, 0).Raw))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.Remove(path)) }()
	r, err := benchload.Run(ctx, 1, benchload.Limit{Ops: 500}, l.Op)
	s.stats(1, commit).add(r)
	return errors.Join(err, l.Close())
}
