package agent

import (
	"time"

	"github.com/fencegate/fencegate/internal/buildinfo"
	"github.com/fencegate/fencegate/protocol"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the agent's Prometheus series. Labels are bounded: result
// codes, and device ids from the config file; never command ids.
type metrics struct {
	reg          *prometheus.Registry
	commands     *prometheus.CounterVec
	fenceRaises  prometheus.Counter
	commit       prometheus.Histogram
	commitOps    prometheus.Histogram
	apply        prometheus.Histogram
	queueDepth   *prometheus.GaugeVec
	mqttUp       prometheus.Gauge
	grantsIgnore prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fencegate_agent_commands_total",
			Help: "Commands answered, by result code."}, []string{"code"}),
		fenceRaises: prometheus.NewCounter(prometheus.CounterOpts{Name: "fencegate_agent_fence_advances_total",
			Help: "Times a device's fence moved to a newer token."}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fencegate_agent_commit_seconds",
			Help: "Duration of one group commit (fsync included).", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		commitOps: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fencegate_agent_commit_ops",
			Help: "Operations per group commit.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		apply: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fencegate_agent_apply_seconds",
			Help: "Duration of one driver apply.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fencegate_agent_queue_depth",
			Help: "Commands waiting in a device's queue."}, []string{"device"}),
		mqttUp: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fencegate_agent_mqtt_connected",
			Help: "1 while the agent is connected to its broker."}),
		grantsIgnore: prometheus.NewCounter(prometheus.CounterOpts{Name: "fencegate_agent_grants_ignored_total",
			Help: "Grant announcements ignored (bad signature, foreign domain, undecodable)."}),
	}
	m.reg.MustRegister(m.commands, m.fenceRaises, m.commit, m.commitOps, m.apply, m.queueDepth, m.mqttUp,
		m.grantsIgnore, buildinfo.Collector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) onCommit(ops int, took time.Duration) {
	m.commit.Observe(took.Seconds())
	m.commitOps.Observe(float64(ops))
}

func (m *metrics) answered(code protocol.Code) { m.commands.WithLabelValues(string(code)).Inc() }
