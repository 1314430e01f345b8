package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berthmq/berth/internal/latency"
)

var descStage = prometheus.NewDesc("berth_produce_stage_seconds",
	"Time produce requests (queue, validate, response, total: per request) and their batches "+
		"(flush_wait, write, fsync_wait, fsync, isr_wait: per partition batch; replica_write, replica_fsync, replica_ack: "+
		"on a follower, per partition of a fetch response with data) spent in each stage of the produce path on this node. "+
		"The batch stages count durability.mode=fsync only.",
	[]string{"stage"}, nil)

// stageCollector exports the produce path's stage histograms.
type stageCollector struct{ n *Node }

func (c *stageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descStage }

func (c *stageCollector) Collect(ch chan<- prometheus.Metric) {
	bounds := latency.Bounds()
	set := &c.n.replicas.Metrics.Stages
	for _, st := range latency.Stages() {
		cum, count, sum := set[st].Snapshot()
		buckets := make(map[float64]uint64, len(bounds))
		for i, b := range bounds {
			buckets[b] = cum[i]
		}
		ch <- prometheus.MustNewConstHistogram(descStage, count, sum, buckets, st.String())
	}
}
