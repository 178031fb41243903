// Package metrics exports a lease controller's Prometheus metrics. Labels
// are bounded: op (4 values) and code (9 values); no domain or holder.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/protocol"
)

// Metrics implements lease.Observer and records store commits. Safe for
// concurrent use.
type Metrics struct {
	grants   prometheus.Counter
	denials  *prometheus.CounterVec
	requests *prometheus.HistogramVec
	commits  prometheus.Histogram
	batch    prometheus.Histogram
}

var _ lease.Observer = (*Metrics)(nil)

// New registers the controller's metrics with reg. active is called at
// each scrape for the number of live leases.
func New(reg prometheus.Registerer, active func() int) *Metrics {
	m := &Metrics{
		grants: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencegate_lease_grants_total", Help: "New leases granted (new tokens minted and made durable).",
		}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencegate_lease_denials_total", Help: "Lease requests not satisfied, by response code.",
		}, []string{"code"}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fencegate_lease_request_duration_seconds", Help: "Time to answer a lease request, waits included, by op.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"op"}),
		commits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fencegate_lease_commit_duration_seconds", Help: "Time of one durable store commit (fsync included).",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 14),
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fencegate_lease_commit_batch_size", Help: "Writes group-committed in one store commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
	}
	activeGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fencegate_lease_active", Help: "Domains with a live lease.",
	}, func() float64 { return float64(active()) })
	reg.MustRegister(m.grants, m.denials, m.requests, m.commits, m.batch, activeGauge)
	return m
}

// RegisterDomains registers fencegate_lease_domains, the domains the
// controller holds in memory (lease.Controller.Domains, bounded by
// max_domains); inMemory is called at each scrape.
func RegisterDomains(reg prometheus.Registerer, inMemory func() int) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fencegate_lease_domains", Help: "Domains held in memory: live leases, waiting acquires, operations under way.",
	}, func() float64 { return float64(inMemory()) }))
}

// Observe records one operation's outcome and duration.
func (m *Metrics) Observe(op protocol.LeaseOp, code protocol.Code, took time.Duration) {
	m.requests.WithLabelValues(string(op)).Observe(took.Seconds())
	switch code {
	case protocol.CodeGranted, protocol.CodeRenewed, protocol.CodeReleased:
	case protocol.CodeHeld:
		if op != protocol.OpGet {
			m.denials.WithLabelValues(string(code)).Inc()
		}
	default:
		if op != protocol.OpGet || code != protocol.CodeExpired {
			m.denials.WithLabelValues(string(code)).Inc()
		}
	}
}

// Granted counts one new lease; call it from the controller's OnGrant (a
// retried request answered with its earlier grant is not counted).
func (m *Metrics) Granted() { m.grants.Inc() }

// ObserveCommit records one store commit; use it as the store's OnCommit.
func (m *Metrics) ObserveCommit(ops int, took time.Duration) {
	m.commits.Observe(took.Seconds())
	m.batch.Observe(float64(ops))
}
