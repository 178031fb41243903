package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/fencegate/fencegate/internal/benchgrant"
	"github.com/fencegate/fencegate/internal/benchline"
	"github.com/fencegate/fencegate/internal/benchload"
	"github.com/fencegate/fencegate/lease/etcdstore"
	"github.com/fencegate/fencegate/lease/etcdstore/etcdtest"
)

// domainCounts are the figures' concurrencies: one domain (or mutex) per
// goroutine, one operation in flight each.
var domainCounts = []int{1, 100}

// goalVsMutex bounds grants/s ÷ etcd's own lock recipe at the same
// concurrency. A grant on etcd is a read and one compare-and-put
// transaction, a mutex hand-over a put, a range and a delete: the
// controller should do at least as well as the recipe.
const goalVsMutex = 1.0

// figures holds every run's rates.
type figures struct {
	raw           []float64
	grants, locks map[int][]float64
}

func measure(ctx context.Context, r *runner, c *etcdtest.Cluster, cfg config) error {
	d := cfg.d
	f := figures{grants: map[int][]float64{}, locks: map[int][]float64{}}
	for run := range cfg.runs {
		raw, err := benchload.RawFsync(ctx, r.dir, d)
		if err != nil {
			return fmt.Errorf("raw fdatasync: %w", err)
		}
		f.raw = append(f.raw, raw.Rate())
		for _, n := range domainCounts {
			g, err := grants(ctx, c, fmt.Sprintf("bench-%d-%d/", run, n), n, d)
			if err != nil {
				return fmt.Errorf("grants, %d domains: %w", n, err)
			}
			m, err := locks(ctx, r, c, fmt.Sprintf("bench-mutex-%d-%d/", run, n), n, d)
			if err != nil {
				return fmt.Errorf("mutex, %d keys: %w", n, err)
			}
			f.grants[n], f.locks[n] = append(f.grants[n], g.Rate()), append(f.locks[n], m.Rate())
		}
	}
	return f.print(cfg)
}

// print writes the raw fdatasync rate as context (a replicated store
// pays several fsyncs per write, here all on one disk) and one line per
// domain count.
func (f figures) print(cfg config) error {
	cfg.out.Header("raw write+fdatasync loop of the same disk: %.0f/s (median)", benchline.Median(f.raw))
	for _, n := range domainCounts {
		l := benchline.Line{Name: fmt.Sprintf("controller grants (etcd), %d domains, %d in flight", n, n),
			Value: benchline.Median(f.grants[n]), Unit: "grants/s", Baseline: benchline.Median(f.locks[n]), Runs: cfg.runs,
			BaseName: fmt.Sprintf("etcd concurrency.Mutex lock+unlock, %d keys", n)}.AtLeast(goalVsMutex)
		if err := cfg.out.Print(l); err != nil {
			return err
		}
	}
	return nil
}

// grants runs n domains' grants on a new etcd store under prefix for d.
func grants(ctx context.Context, c *etcdtest.Cluster, prefix string, n int, d time.Duration) (_ benchload.Result, err error) {
	st, err := etcdstore.Open(ctx, etcdstore.Config{Endpoints: c.Endpoints(), Prefix: prefix})
	if err != nil {
		return benchload.Result{}, err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	l, err := benchgrant.New(ctx, st)
	if err != nil {
		return benchload.Result{}, err
	}
	return benchload.Run(ctx, n, benchload.Limit{Duration: d}, l.Op)
}

// locks runs, for d, n goroutines each locking and unlocking its own
// concurrency.Mutex under prefix, in one session.
func locks(ctx context.Context, r *runner, c *etcdtest.Cluster, prefix string, n int, d time.Duration) (_ benchload.Result, err error) {
	s, err := concurrency.NewSession(c.Client(r))
	if err != nil {
		return benchload.Result{}, err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	mutexes := make([]*concurrency.Mutex, n)
	for i := range mutexes {
		mutexes[i] = concurrency.NewMutex(s, fmt.Sprintf("%s%d/", prefix, i))
	}
	return benchload.Run(ctx, n, benchload.Limit{Duration: d}, func(ctx context.Context, dev, _ int) error {
		if err := mutexes[dev].Lock(ctx); err != nil {
			return err
		}
		return mutexes[dev].Unlock(ctx)
	})
}
