package app

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berthmq/berth/internal/audit"
	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/config"
)

// auditEnabled reads audit.log.enable: auto turns the audit trail on
// when the cluster is shared, that is when an authorizer
// (authorizer.class.name) or a SASL listener is configured.
func auditEnabled(cfg *config.Config) bool {
	switch cfg.Get("audit.log.enable") {
	case "true":
		return true
	case "false":
		return false
	}
	if cfg.Get("authorizer.class.name") != "" {
		return true
	}
	ls, err := cfg.KafkaListeners()
	if err != nil {
		return false // Validate refuses the config before the audit trail matters
	}
	for _, l := range ls {
		if strings.HasPrefix(l.Protocol, "SASL_") {
			return true
		}
	}
	return false
}

// startAudit makes and starts the audit writer when the audit trail is
// on; the handlers then send their events to it (else to NopAuditor).
func (n *Node) startAudit(cfg *config.Config) error {
	if !auditEnabled(cfg) {
		return nil
	}
	kinds := map[string]bool{}
	for _, k := range strings.Split(cfg.Get("audit.log.events"), ",") {
		kinds[strings.TrimSpace(k)] = true
	}
	spec := audit.TopicSpec(cfg)
	w := audit.New(audit.Config{
		Kinds: kinds, Topic: true, File: cfg.Get("audit.log.file"),
		Buffer: int(cfg.Int("audit.log.buffer.events")), AggregateEvery: cfg.Duration("audit.log.allow.aggregation.ms"),
		ClusterID: func() string { return n.ctrl.Image().ClusterID }, NodeID: n.nodeID,
		Ensure: func(ctx context.Context) error {
			_, err := n.topics.EnsureInternal(ctx, spec)
			return err
		},
		Sink:   (&audit.ReplicaSink{Replicas: n.replicas, Image: n.ctrl.Image, Peers: n.peers, NodeID: n.nodeID}).Write,
		Logger: n.log.With("component", "audit"),
	})
	if err := w.Start(); err != nil {
		return err
	}
	n.audit = w
	n.kh.SetAuditor(w)
	return nil
}

// registerAuditMetrics registers the audit writer's counters (zero when
// the audit trail is off).
func (n *Node) registerAuditMetrics(reg prometheus.Registerer) {
	counter := func(name, help string, f func(m *audit.Metrics) int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 {
			if n.audit == nil {
				return 0
			}
			return float64(f(&n.audit.Metrics))
		}))
	}
	counter("berth_audit_events_total", "Audit events taken (an aggregated data-plane allow counts each decision).", func(m *audit.Metrics) int64 { return m.Events.Load() })
	counter("berth_audit_written_events_total", "Audit records appended to __berth_audit.", func(m *audit.Metrics) int64 { return m.Written.Load() })
	counter("berth_audit_dropped_events_total", "Audit events lost: the buffer was full or the write to __berth_audit failed.", func(m *audit.Metrics) int64 { return m.Dropped.Load() })
	counter("berth_audit_write_errors_total", "Failed writes of audit batches (to __berth_audit or the audit file).", func(m *audit.Metrics) int64 { return m.Errors.Load() })
}

// Auditor is the auditor the handlers send events to (the audit writer,
// or auth.NopAuditor when the audit trail is off); tests feed it events.
func (n *Node) Auditor() auth.Auditor { return n.kh.Auditor }
