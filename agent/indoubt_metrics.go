package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencegate/fencegate/persist"
)

var inDoubtDesc = prometheus.NewDesc("fencegate_agent_in_doubt_commands",
	"Open in-doubt commands of a device: accepted, outcome unknown, not yet resolved by an operator.",
	[]string{"device"}, nil)

// inDoubtCollector reads the open in-doubt counts from the store at each
// scrape, so the gauge can never drift from the journal. Labels are the
// configured devices only.
type inDoubtCollector struct {
	store   *persist.Store
	devices []DeviceConfig
}

func (c inDoubtCollector) Describe(ch chan<- *prometheus.Desc) { ch <- inDoubtDesc }

func (c inDoubtCollector) Collect(ch chan<- prometheus.Metric) {
	counts, err := c.store.InDoubtCounts()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(inDoubtDesc, err)
		return
	}
	for _, d := range c.devices {
		ch <- prometheus.MustNewConstMetric(inDoubtDesc, prometheus.GaugeValue, float64(counts[d.ID]), d.ID)
	}
}
