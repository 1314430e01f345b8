package config

import (
	"fmt"
	"strings"
)

// The audit trail's settings (internal/audit): what is recorded, the
// __berth_audit topic and the optional file sink.
func init() {
	brokerDefs = append(brokerDefs,
		Def{Name: "audit.log.enable", Kind: KindString, Default: "auto", Valid: oneOf("auto", "true", "false"),
			Doc: "Record the audit trail (authentication, authorization decisions, changes) in __berth_audit. auto: on when an authorizer (authorizer.class.name) or a SASL listener is configured, off otherwise."},
		Def{Name: "audit.log.events", Kind: KindList, Default: "authentication,authorization,management", Valid: validAuditEvents,
			Doc: "Kinds of audit events recorded: authentication, authorization, management (a comma-separated subset)."},
		Def{Name: "audit.log.topic.num.partitions", Kind: KindInt, Default: "3", Valid: atLeast(1),
			Doc: "Partitions of __berth_audit (events are keyed by principal). Fixed once the topic exists."},
		Def{Name: "audit.log.topic.replication.factor", Kind: KindInt, Default: "3", Valid: atLeast(1),
			Doc: "Replication factor of __berth_audit, capped at the cluster's nodes; the topic is created on first use once that many brokers are live."},
		Def{Name: "audit.log.topic.segment.bytes", Kind: KindInt, Default: "104857600", Valid: atLeast(1024),
			Doc: "Segment size of __berth_audit (retention deletes whole segments)."},
		Def{Name: "audit.log.retention.ms", Kind: KindLong, Default: "604800000", Valid: atLeast(-1),
			Doc: "retention.ms of __berth_audit when it is created (cleanup.policy=delete, never compacted); -1 keeps events forever. Change it later on the topic (berth topic alter __berth_audit --config retention.ms=...)."},
		Def{Name: "audit.log.file", Kind: KindString, Default: "",
			Doc: "Also append every audit event to this file as JSON lines (fsynced by batch). Empty: no file."},
		Def{Name: "audit.log.buffer.events", Kind: KindInt, Default: "10000", Valid: atLeast(1),
			Doc: "Audit events held in memory waiting to be written; beyond it events are dropped (berth_audit_dropped_events_total), never a request delayed."},
		Def{Name: "audit.log.allow.aggregation.ms", Kind: KindLong, Default: "60000", Valid: atLeast(10),
			Doc: "Data-plane authorization allows (READ, WRITE, DESCRIBE, IDEMPOTENT_WRITE) are recorded as one event per principal, client, resource and operation per interval of this length, with a count, never per request."},
	)
}

// validAuditEvents checks audit.log.events.
func validAuditEvents(v string) error {
	for _, k := range strings.Split(v, ",") {
		switch strings.TrimSpace(k) {
		case "authentication", "authorization", "management", "":
		default:
			return fmt.Errorf("unknown audit event kind %q: want authentication, authorization or management", k)
		}
	}
	return nil
}
