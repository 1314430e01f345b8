package app

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descLag = prometheus.NewDesc("berth_group_lag_records",
		"Records between a group's committed offset and the high watermark.", []string{"group", "topic", "partition"}, nil)
	descAge = prometheus.NewDesc("berth_group_oldest_unconsumed_age_seconds",
		"Age of the record at the group's committed offset (0 when caught up).", []string{"group", "topic", "partition"}, nil)
	descCommitted = prometheus.NewDesc("berth_group_committed_offset",
		"A group's committed offset.", []string{"group", "topic", "partition"}, nil)
	descRebalances = prometheus.NewDesc("berth_group_rebalances_total",
		"Rebalances (generations) a group went through on this coordinator.", []string{"group"}, nil)
	descMembers = prometheus.NewDesc("berth_group_members",
		"Members of a group.", []string{"group", "state"}, nil)
)

// groupCollector computes lag and oldest-unconsumed age broker-side at
// scrape time, for every committed offset this node's coordinator holds.
type groupCollector struct{ n *Node }

func (c *groupCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLag
	ch <- descAge
	ch <- descCommitted
	ch <- descRebalances
	ch <- descMembers
}

func (c *groupCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, co := range c.n.groups.Committed() {
		part := strconv.Itoa(int(co.Partition))
		ch <- prometheus.MustNewConstMetric(descCommitted, prometheus.GaugeValue, float64(co.Offset), co.Group, co.Topic, part)
		p := c.n.replicas.Get(co.Topic, co.Partition)
		if p == nil || co.Offset < 0 {
			continue
		}
		hw := p.HighWatermark()
		lag := hw - co.Offset
		if lag < 0 {
			lag = 0
		}
		age := 0.0
		if lag > 0 {
			if ts, ok := p.TimestampAt(max(co.Offset, p.LogStartOffset())); ok {
				age = max(0, now.Sub(time.UnixMilli(ts)).Seconds())
			}
		}
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(lag), co.Group, co.Topic, part)
		ch <- prometheus.MustNewConstMetric(descAge, prometheus.GaugeValue, age, co.Group, co.Topic, part)
	}
	for _, g := range c.n.groups.Groups() {
		ch <- prometheus.MustNewConstMetric(descRebalances, prometheus.CounterValue, float64(g.Rebalances), g.ID)
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(g.Members), g.ID, g.State)
	}
}
