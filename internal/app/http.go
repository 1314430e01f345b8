package app

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/berthmq/berth/internal/server"
)

// advertisedHTTP is the HTTP listener's address as other nodes reach
// it: its own, or, bound to every interface, the inter-broker listener's
// advertised host with its port.
func advertisedHTTP(a net.Addr, host string) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if ta.IP == nil || ta.IP.IsUnspecified() {
		return net.JoinHostPort(host, strconv.Itoa(ta.Port))
	}
	return ta.String()
}

// startHTTP serves /metrics (Prometheus), /healthz and the schema
// registry on the listener bound at start.
func (n *Node) startHTTP() error {
	raw := n.httpRaw
	ln := raw
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	n.registerMetrics(reg)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := n.ctrl.Err(); err != nil {
			http.Error(w, "metadata controller stopped: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if n.replicas.DiskLow() {
			http.Error(w, "log directory nearly full: produce refused", http.StatusServiceUnavailable)
			return
		}
		if failed := n.replicas.Failed(); len(failed) > 0 {
			http.Error(w, fmt.Sprintf("partitions refusing writes after an fsync failure (restart to recover): %v", failed), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	// Go profiles, for performance work; the HTTP listener is loopback-only by default.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if n.schemas != nil {
		// The Confluent Schema Registry API, at the paths its clients use.
		mux.Handle("/", n.schemas.handler())
	}
	ln, h, err := n.httpSecurity(ln, mux)
	if err != nil {
		raw.Close()
		return err
	}
	n.httpLn = ln
	n.http = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := n.http.Serve(ln); err != nil && err != http.ErrServerClosed {
			n.log.Error("http listener stopped", "err", err)
		}
	}()
	return nil
}

func (n *Node) registerMetrics(reg prometheus.Registerer) {
	reg.MustRegister(newCertExpiry(n))
	rm := &n.replicas.Metrics
	counter := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f))
	}
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	n.registerAuditMetrics(reg)
	gauge("berth_server_connections", "Open Kafka connections.", func() float64 { return n.serverSum(func(m *server.Metrics) int64 { return m.ConnectionsOpen.Load() }) })
	counter("berth_server_connections_total", "Kafka connections accepted.", func() float64 { return n.serverSum(func(m *server.Metrics) int64 { return m.ConnectionsTotal.Load() }) })
	counter("berth_server_requests_total", "Kafka requests read.", func() float64 { return n.serverSum(func(m *server.Metrics) int64 { return m.Requests.Load() }) })
	counter("berth_server_tls_handshake_failures_total", "Kafka connections closed in a failed TLS handshake (no or an untrusted client certificate, an unsupported version).", func() float64 {
		return n.serverSum(func(m *server.Metrics) int64 { return m.TLSHandshakeFailures.Load() })
	})
	counter("berth_server_bad_frames_total", "Connections closed for malformed or unsupported requests.", func() float64 { return n.serverSum(func(m *server.Metrics) int64 { return m.BadFrames.Load() }) })
	counter("berth_log_fsyncs_total", "Partition fsyncs.", func() float64 { return float64(rm.Fsyncs.Load()) })
	counter("berth_log_fsync_seconds_total", "Time spent in partition fsyncs.", func() float64 { return float64(rm.FsyncNanos.Load()) / 1e9 })
	counter("berth_log_filesystem_syncs_total", "Group-commit rounds that made their partitions durable with one sync of the log directory's filesystem (log.flush.filesystem.partitions) instead of one fsync each; also counted in berth_log_fsyncs_total.", func() float64 { return float64(rm.FilesystemSyncs.Load()) })
	counter("berth_log_group_commits_total", "Group-commit rounds (one round covers every partition written since the last).", func() float64 { return float64(rm.SyncRounds.Load()) })
	counter("berth_log_cleaner_runs_total", "Partitions compacted by the log cleaner.", func() float64 { return float64(rm.CleanerRuns.Load()) })
	counter("berth_log_cleaner_bytes_freed_total", "Bytes the log cleaner removed.", func() float64 { return float64(rm.CleanerBytesFreed.Load()) })
	counter("berth_log_retention_segments_deleted_total", "Segments deleted by retention.", func() float64 { return float64(rm.RetentionSegs.Load()) })
	gauge("berth_log_dir_full", "1 while produce is refused for lack of disk space.", func() float64 {
		if n.replicas.DiskLow() {
			return 1
		}
		return 0
	})
	counter("berth_isr_shrinks_total", "ISR shrinks proposed by partitions this node leads (a follower fell behind replica.lag.time.max.ms).", func() float64 { return float64(rm.ISRShrinks.Load()) })
	counter("berth_isr_expands_total", "ISR expansions proposed by partitions this node leads (a follower caught up).", func() float64 { return float64(rm.ISRExpands.Load()) })
	counter("berth_isr_change_failures_total", "ISR changes proposed by partitions this node leads that the controller refused (stale partition epoch, ineligible replica) or that did not commit.", func() float64 { return float64(rm.ISRChangeFailures.Load()) })
	reg.MustRegister(&partitionCollector{n: n})
	reg.MustRegister(&stageCollector{n: n})
	reg.MustRegister(&replicationCollector{n: n})
	reg.MustRegister(&shareCollector{n: n})
	reg.MustRegister(&groupCollector{n: n})
	n.txns.RegisterMetrics(reg)
	reg.MustRegister(&lsoCollector{n: n})
	n.registerQuotaMetrics(reg)

	reg.MustRegister(&denialCollector{n: n})
	reg.MustRegister(&saslCollector{n: n})
	if n.schemas != nil {
		reg.MustRegister(schemaCollector{n.schemas})
	}
}

var (
	descLEO   = prometheus.NewDesc("berth_partition_log_end_offset", "Offset the next record gets.", []string{"topic", "partition"}, nil)
	descHW    = prometheus.NewDesc("berth_partition_high_watermark", "Committed (durable) offset.", []string{"topic", "partition"}, nil)
	descStart = prometheus.NewDesc("berth_partition_log_start_offset", "First readable offset.", []string{"topic", "partition"}, nil)
	descSize  = prometheus.NewDesc("berth_partition_size_bytes", "Bytes of log segments.", []string{"topic", "partition"}, nil)
)

// partitionCollector reports per-partition gauges at scrape time.
type partitionCollector struct{ n *Node }

func (c *partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLEO
	ch <- descHW
	ch <- descStart
	ch <- descSize
}

func (c *partitionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.n.replicas.All() {
		part := strconv.Itoa(int(p.Index))
		ch <- prometheus.MustNewConstMetric(descLEO, prometheus.GaugeValue, float64(p.LogEndOffset()), p.Topic, part)
		ch <- prometheus.MustNewConstMetric(descHW, prometheus.GaugeValue, float64(p.HighWatermark()), p.Topic, part)
		ch <- prometheus.MustNewConstMetric(descStart, prometheus.GaugeValue, float64(p.LogStartOffset()), p.Topic, part)
		ch <- prometheus.MustNewConstMetric(descSize, prometheus.GaugeValue, float64(p.Log().Size()), p.Topic, part)
	}
}

var (
	descUnder = prometheus.NewDesc("berth_partitions_under_replicated",
		"Partitions this node leads whose in-sync replica set is smaller than their replica set.", nil, nil)
	descOffline = prometheus.NewDesc("berth_partitions_offline",
		"Partitions without a leader, cluster-wide; reported by the active controller only (0 elsewhere).", nil, nil)
	descISR = prometheus.NewDesc("berth_partition_in_sync_replicas",
		"In-sync replicas of a partition this node leads.", []string{"topic", "partition"}, nil)
	descFollowerLag = prometheus.NewDesc("berth_replication_follower_lag_records",
		"Records a follower is behind the leader's log end (on the leader; -1 offset before its first fetch counts the whole log).",
		[]string{"topic", "partition", "follower"}, nil)
)

// replicationCollector reports the health of replication at scrape time.
type replicationCollector struct{ n *Node }

func (c *replicationCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descUnder
	ch <- descOffline
	ch <- descISR
	ch <- descFollowerLag
}

func (c *replicationCollector) Collect(ch chan<- prometheus.Metric) {
	under := 0
	for _, p := range c.n.replicas.All() {
		if !p.IsLeader() {
			continue
		}
		part := strconv.Itoa(int(p.Index))
		isr := p.ISR()
		ch <- prometheus.MustNewConstMetric(descISR, prometheus.GaugeValue, float64(len(isr)), p.Topic, part)
		fs := p.Followers()
		if len(isr) < len(fs)+1 {
			under++
		}
		for _, f := range fs {
			ch <- prometheus.MustNewConstMetric(descFollowerLag, prometheus.GaugeValue, float64(f.Lag), p.Topic, part, strconv.Itoa(int(f.Broker)))
		}
	}
	ch <- prometheus.MustNewConstMetric(descUnder, prometheus.GaugeValue, float64(under))
	offline := 0
	if c.n.ctrl.IsLeader() {
		im := c.n.ctrl.Image()
		for _, t := range im.Topics {
			for _, mp := range t.Partitions {
				if mp.Leader < 0 {
					offline++
				}
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(descOffline, prometheus.GaugeValue, float64(offline))
}

var descLSOLag = prometheus.NewDesc("berth_partition_lso_lag_records",
	"High watermark minus the last stable offset of a partition this node leads: records read_committed consumers cannot see yet because a transaction is open.", []string{"topic", "partition"}, nil)

// lsoCollector reports each led partition's LSO lag at scrape time.
type lsoCollector struct{ n *Node }

func (c *lsoCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descLSOLag }

func (c *lsoCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.n.replicas.All() {
		if !p.IsLeader() {
			continue
		}
		lag := p.HighWatermark() - p.LastStableOffset()
		ch <- prometheus.MustNewConstMetric(descLSOLag, prometheus.GaugeValue, float64(max(lag, 0)), p.Topic, strconv.Itoa(int(p.Index)))
	}
}

var (
	shareLabels       = []string{"group", "topic", "partition"}
	descShareAvail    = prometheus.NewDesc("berth_share_available_records", "Records a share group can acquire now: available in its window plus those past it up to the high watermark.", shareLabels, nil)
	descShareDelayed  = prometheus.NewDesc("berth_share_delayed_records", "Records waiting out their retry backoff before they are available again.", shareLabels, nil)
	descShareInflight = prometheus.NewDesc("berth_share_inflight_records", "Records acquired by a consumer and not yet acknowledged (under an acquisition lock).", shareLabels, nil)
	descShareAge      = prometheus.NewDesc("berth_share_oldest_available_age_seconds", "How long the oldest record available now has been waiting for a consumer (0 when none).", shareLabels, nil)
	descShareRedeliv  = prometheus.NewDesc("berth_share_redeliveries_total", "Records delivered again (delivery count above 1), since this broker took the share-partition.", shareLabels, nil)
	descShareArchived = prometheus.NewDesc("berth_share_archived_records_total", "Records given up on, by reason (rejected by a consumer, or delivery limit reached), since this broker took the share-partition.", append(shareLabels, "reason"), nil)
	descShareDLQ      = prometheus.NewDesc("berth_share_dlq_records_total", "Records written to the group's dead-letter topic, since this broker took the share-partition.", shareLabels, nil)
)

// shareCollector reports the share-partitions (work queues) this node
// leads, at scrape time.
type shareCollector struct{ n *Node }

func (c *shareCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descShareAvail, descShareDelayed, descShareInflight, descShareAge, descShareRedeliv, descShareArchived, descShareDLQ} {
		ch <- d
	}
}

func (c *shareCollector) Collect(ch chan<- prometheus.Metric) {
	if c.n.shares == nil {
		return
	}
	now := time.Now()
	for _, s := range c.n.shares.AllStats() {
		l := []string{s.Key.Group, s.Topic, strconv.Itoa(int(s.Key.Partition))}
		avail := s.Available
		if p := c.n.replicas.Get(s.Topic, s.Key.Partition); p != nil {
			avail += max(0, p.HighWatermark()-s.EndOffset)
		}
		age := 0.0
		if !s.OldestAvailableSince.IsZero() {
			age = max(0, now.Sub(s.OldestAvailableSince).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(descShareAvail, prometheus.GaugeValue, float64(avail), l...)
		ch <- prometheus.MustNewConstMetric(descShareDelayed, prometheus.GaugeValue, float64(s.Delayed), l...)
		ch <- prometheus.MustNewConstMetric(descShareInflight, prometheus.GaugeValue, float64(s.Acquired), l...)
		ch <- prometheus.MustNewConstMetric(descShareAge, prometheus.GaugeValue, age, l...)
		ch <- prometheus.MustNewConstMetric(descShareRedeliv, prometheus.CounterValue, float64(s.Redeliveries), l...)
		ch <- prometheus.MustNewConstMetric(descShareArchived, prometheus.CounterValue, float64(s.Rejected), append(l, "rejected")...)
		ch <- prometheus.MustNewConstMetric(descShareArchived, prometheus.CounterValue, float64(s.DeliveryLimits), append(l, "delivery_limit")...)
		ch <- prometheus.MustNewConstMetric(descShareDLQ, prometheus.CounterValue, float64(s.DLQWritten), l...)
	}
}
