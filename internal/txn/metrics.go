package txn

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descTxnOpen = prometheus.NewDesc("berth_txn_open_transactions",
		"Transactions open (Ongoing, PrepareCommit, PrepareAbort) on a __transaction_state partition this node coordinates.", []string{"partition"}, nil)
	descTxnOldest = prometheus.NewDesc("berth_txn_oldest_open_age_seconds",
		"Age of the oldest open transaction on a __transaction_state partition this node coordinates (0: none).", []string{"partition"}, nil)
)

// RegisterMetrics registers the coordinator's gauges on reg; they are
// computed at scrape time.
func (c *Coordinator) RegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(&collector{c: c})
}

// collector reports the transaction coordinator's gauges at scrape time.
type collector struct{ c *Coordinator }

func (m *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTxnOpen
	ch <- descTxnOldest
}

func (m *collector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, p := range m.c.Loaded() {
		var open int
		var oldest time.Time
		if m.c.View(p, func(tp *Partition) { open, oldest = tp.OpenStats() }) != nil {
			continue
		}
		age := 0.0
		if open > 0 && !oldest.IsZero() {
			age = max(0, now.Sub(oldest).Seconds())
		}
		part := strconv.Itoa(int(p))
		ch <- prometheus.MustNewConstMetric(descTxnOpen, prometheus.GaugeValue, float64(open), part)
		ch <- prometheus.MustNewConstMetric(descTxnOldest, prometheus.GaugeValue, age, part)
	}
}
