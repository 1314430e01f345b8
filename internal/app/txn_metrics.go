package app

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berthmq/berth/internal/txn"
)

var (
	descTxnOpen = prometheus.NewDesc("berth_txn_open_transactions",
		"Transactions open (Ongoing, PrepareCommit, PrepareAbort) on a __transaction_state partition this node coordinates.", []string{"partition"}, nil)
	descTxnOldest = prometheus.NewDesc("berth_txn_oldest_open_age_seconds",
		"Age of the oldest open transaction on a __transaction_state partition this node coordinates (0: none).", []string{"partition"}, nil)
	descLSOLag = prometheus.NewDesc("berth_partition_lso_lag_records",
		"High watermark minus the last stable offset of a partition this node leads: records read_committed consumers cannot see yet because a transaction is open.", []string{"topic", "partition"}, nil)
)

// txnCollector reports the transaction coordinator's gauges and each led
// partition's LSO lag at scrape time.
type txnCollector struct{ n *Node }

func (c *txnCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTxnOpen
	ch <- descTxnOldest
	ch <- descLSOLag
}

func (c *txnCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	if c.n.txns != nil {
		for _, p := range c.n.txns.Loaded() {
			var open int
			var oldest time.Time
			if c.n.txns.View(p, func(tp *txn.Partition) { open, oldest = tp.OpenStats() }) != nil {
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
	for _, p := range c.n.replicas.All() {
		if !p.IsLeader() {
			continue
		}
		lag := p.HighWatermark() - p.LastStableOffset()
		ch <- prometheus.MustNewConstMetric(descLSOLag, prometheus.GaugeValue, float64(max(lag, 0)), p.Topic, strconv.Itoa(int(p.Index)))
	}
}
