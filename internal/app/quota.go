package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berthmq/berth/internal/server"
)

// Per-principal client metrics (auth.ClientMetrics, counted by the
// handler's quotas): principals past quota.metrics.max.principals are
// labelled "other".
var (
	descClientBytesIn    = prometheus.NewDesc("berth_client_bytes_in_total", "Record bytes produced (appended), by principal.", []string{"principal"}, nil)
	descClientBytesOut   = prometheus.NewDesc("berth_client_bytes_out_total", "Record bytes fetched by consumers, by principal.", []string{"principal"}, nil)
	descClientRecordsIn  = prometheus.NewDesc("berth_client_records_in_total", "Records produced (appended), by principal.", []string{"principal"}, nil)
	descClientRecordsOut = prometheus.NewDesc("berth_client_records_out_total", "Records fetched by consumers, by principal.", []string{"principal"}, nil)
	descClientThrottle   = prometheus.NewDesc("berth_client_throttle_seconds_total", "Throttle time given to clients over a quota, by principal and quota key.", []string{"principal", "quota"}, nil)
	descClientRejected   = prometheus.NewDesc("berth_client_rejected_requests_total", "Requests or partitions refused by a quota (THROTTLING_QUOTA_EXCEEDED, MESSAGE_TOO_LARGE for max_record_bytes), by principal and quota key.", []string{"principal", "reason"}, nil)
)

func (n *Node) registerQuotaMetrics(reg prometheus.Registerer) {
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "berth_server_connections_refused_total",
		Help: "Connections closed at once for an ip's connection_creation_rate quota."},
		func() float64 {
			return n.serverSum(func(m *server.Metrics) int64 { return m.ConnectionsRefused.Load() })
		}))
	reg.MustRegister(&clientCollector{n: n})
}

// clientCollector reports the per-principal counters at scrape time.
type clientCollector struct{ n *Node }

func (c *clientCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descClientBytesIn, descClientBytesOut, descClientRecordsIn, descClientRecordsOut, descClientThrottle, descClientRejected} {
		ch <- d
	}
}

func (c *clientCollector) Collect(ch chan<- prometheus.Metric) {
	if c.n.kh == nil || c.n.kh.ClientMetrics == nil {
		return
	}
	for _, s := range c.n.kh.ClientMetrics.Snapshot() {
		ch <- prometheus.MustNewConstMetric(descClientBytesIn, prometheus.CounterValue, float64(s.BytesIn), s.Principal)
		ch <- prometheus.MustNewConstMetric(descClientBytesOut, prometheus.CounterValue, float64(s.BytesOut), s.Principal)
		ch <- prometheus.MustNewConstMetric(descClientRecordsIn, prometheus.CounterValue, float64(s.RecordsIn), s.Principal)
		ch <- prometheus.MustNewConstMetric(descClientRecordsOut, prometheus.CounterValue, float64(s.RecordsOut), s.Principal)
		for q, ns := range s.ThrottleNanos {
			ch <- prometheus.MustNewConstMetric(descClientThrottle, prometheus.CounterValue, float64(ns)/1e9, s.Principal, q)
		}
		for r, v := range s.Rejected {
			ch <- prometheus.MustNewConstMetric(descClientRejected, prometheus.CounterValue, float64(v), s.Principal, r)
		}
	}
}
