package etcdtest

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/boltstore"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/protocol"
)

// BenchmarkGrants measures durable grants per second in one run: on the
// 3-member etcd cluster, on bbolt beside it, and etcd's own
// concurrency.Mutex lock/unlock loop as the yardstick of what one etcd
// round trip per hand-over costs. serial: one domain, one grant at a time;
// 32domains: 32 goroutines on their own domains.
func BenchmarkGrants(b *testing.B) {
	c := StartCluster(b, 3)
	stores := map[string]func(b *testing.B) lease.Store{
		"etcd": func(b *testing.B) lease.Store { return opener(c)(b) },
		"bbolt": func(b *testing.B) lease.Store {
			st, err := boltstore.Open(filepath.Join(b.TempDir(), "leases.db"), boltstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return st
		},
	}
	for _, name := range []string{"etcd", "bbolt"} {
		for _, par := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/domains=%d", name, par), func(b *testing.B) {
				st := stores[name](b)
				defer st.Close()
				ctrl, _ := leasetest.MustControllerOn(b, lease.Config{}, st)
				grants(b, ctrl, par)
			})
		}
	}
	b.Run("etcd-mutex/lock-unlock", func(b *testing.B) { mutexLoop(b, c) })
}

// grants runs b.N grants spread over par domains, each call superseding
// the last in its domain, and reports grants/s.
func grants(b *testing.B, ctrl *lease.Controller, par int) {
	per := b.N/par + 1
	var wg sync.WaitGroup
	b.ResetTimer()
	for d := range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				r := ctrl.Do(context.Background(), protocol.OpAcquire, fmt.Sprintf("dom%d", d),
					protocol.Request{RequestID: fmt.Sprint(i), Holder: "bench", TTLms: 60000})
				if r.Code != protocol.CodeGranted {
					b.Errorf("acquire: %+v", r)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(per*par)/b.Elapsed().Seconds(), "grants/s")
}

// mutexLoop locks and unlocks one concurrency.Mutex b.N times in one
// session: a hand-over in etcd's own lock recipe.
func mutexLoop(b *testing.B, c *Cluster) {
	s, err := concurrency.NewSession(c.Client(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m := concurrency.NewMutex(s, "bench-mutex/")
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "locks/s")
}
