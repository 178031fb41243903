package lease_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/lease/leasetest"
	"github.com/fencegate/fencegate/protocol"
)

// BenchmarkGrant measures durable grants (token signed, record fsynced in
// bbolt) one at a time and from 100 domains at once (group-committed).
func BenchmarkGrant(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		c, _, _ := leasetest.MustController(b, lease.Config{})
		for i := 0; b.Loop(); i++ {
			mustGrant(b, c, "d", fmt.Sprint(i))
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "grants/s")
	})
	b.Run("100domains", func(b *testing.B) {
		c, _, _ := leasetest.MustController(b, lease.Config{})
		var wg sync.WaitGroup
		per := b.N/100 + 1
		b.ResetTimer()
		for d := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					mustGrant(b, c, fmt.Sprintf("dom%d", d), fmt.Sprint(i))
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(per*100)/b.Elapsed().Seconds(), "grants/s")
	})
}

// mustGrant acquires domain as one holder under a new request id: each call
// supersedes the last and mints a new token.
func mustGrant(b *testing.B, c *lease.Controller, domain, id string) {
	r := c.Do(context.Background(), protocol.OpAcquire, domain, protocol.Request{RequestID: id, Holder: "bench", TTLms: 60000})
	if r.Code != protocol.CodeGranted {
		b.Errorf("acquire: %+v", r)
	}
}
