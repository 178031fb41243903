package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fencegate/fencegate/internal/benchgrant"
	"github.com/fencegate/fencegate/internal/benchline"
	"github.com/fencegate/fencegate/internal/benchload"
	"github.com/fencegate/fencegate/lease/boltstore"
)

// grantDomains are the domain counts of the controller's grant figures,
// each domain with one acquire in flight.
var grantDomains = []int{1, 100}

// grantGoal bounds grants/s ÷ the raw fdatasync rate of the same disk. A
// grant of one domain waits for its own bbolt commit (two fdatasyncs: the
// pages, then the meta page), so half the raw rate is the ceiling and 0.4
// leaves room for signing; 100 domains share commits (group commit), so
// they must beat the raw rate of a lone writer.
var grantGoal = map[int]float64{1: 0.4, 100: 2}

// grantStats holds the grant figures' runs: per domain count, and the raw
// fdatasync rate measured before each run.
type grantStats struct {
	raw    []float64
	grants map[int][]float64
}

// measureGrants measures the controller on bbolt: for each run, the raw
// fdatasync loop of the scratch disk, then grants at every domain count,
// and prints the lines.
func (s *suite) measureGrants(ctx context.Context) error {
	d := 2 * time.Second
	if s.cfg.quick {
		d = time.Second
	}
	st := grantStats{grants: map[int][]float64{}}
	for range s.cfg.runs {
		raw, err := benchload.RawFsync(ctx, s.dir, d)
		if err != nil {
			return fmt.Errorf("raw fdatasync: %w", err)
		}
		st.raw = append(st.raw, raw.Rate())
		for _, n := range grantDomains {
			r, err := s.grantRun(ctx, n, d)
			if err != nil {
				return fmt.Errorf("grants, %d domains: %w", n, err)
			}
			st.grants[n] = append(st.grants[n], r.Rate())
		}
	}
	for _, n := range grantDomains {
		l := benchline.Line{Name: fmt.Sprintf("controller grants (bbolt), %d domains, %d in flight", n, n),
			Value: benchline.Median(st.grants[n]), Unit: "grants/s", Baseline: benchline.Median(st.raw),
			BaseName: "raw write+fdatasync loop, same disk", Runs: s.cfg.runs}.AtLeast(grantGoal[n])
		if err := s.cfg.out.Print(l); err != nil {
			return err
		}
	}
	return nil
}

// runGrants measures and prints the controller's grant lines alone, in a
// scratch directory of cfg.dir.
func runGrants(ctx context.Context, cfg goalsConfig) (err error) {
	s := &suite{cfg: cfg, res: map[key]*stats{}}
	if s.dir, err = os.MkdirTemp(cfg.dir, "fencebench-"); err != nil {
		return fmt.Errorf("scratch directory: %w", err)
	}
	defer func() { err = errors.Join(err, os.RemoveAll(s.dir)) }()
	return s.measureGrants(ctx)
}

// grantRun runs n domains' grants for d on a new bbolt store in the
// scratch directory, which it removes afterwards.
func (s *suite) grantRun(ctx context.Context, n int, d time.Duration) (_ benchload.Result, err error) {
	path := filepath.Join(s.dir, fmt.Sprintf("leases-%d.db", n))
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		return benchload.Result{}, err
	}
	defer func() { err = errors.Join(err, st.Close(), os.Remove(path)) }()
	l, err := benchgrant.New(ctx, st)
	if err != nil {
		return benchload.Result{}, err
	}
	return benchload.Run(ctx, n, benchload.Limit{Duration: d}, l.Op)
}
