package auth

import "time"

// Event is one entry of the audit trail (who did what to which resource,
// and whether it was allowed). The audit writer turns it into a
// CloudEvents JSON record of __berth_audit.
type Event struct {
	Time      time.Time
	Principal Principal
	Host      string // client address (ip:port)
	Listener  string
	// Kind is what happened: "authentication", "authorization",
	// "management" (a change of topics, configs, ACLs, users, quotas,
	// offsets, DLQ redrive or purge).
	Kind string
	// Method is the Kafka API (e.g. "CreateTopics") or the mechanism
	// for an authentication event (e.g. "SCRAM-SHA-512").
	Method string
	// Operation and ResourceType/ResourceName are Kafka's names (WRITE,
	// TOPIC, orders); empty when not about a resource.
	Operation    string
	ResourceType string
	ResourceName string
	Allowed      bool
	// Error is the Kafka error name (e.g. TOPIC_AUTHORIZATION_FAILED) or
	// a reason; empty on success.
	Error string
	// Detail carries what the change was (a config key and value, an
	// ACL binding), free form, never a secret.
	Detail map[string]string
	// ClientID is the request's client id (requestMetadata.client_id).
	ClientID string
	// PatternType is the ACL pattern type that decided an authorization
	// (LITERAL, PREFIXED); empty when unknown.
	PatternType string
	// Type, if set, overrides the CloudEvents type the writer derives from
	// Kind (io.berth.kafka.<kind>), e.g. io.berth.dlq.purge.
	Type string
}

// Auditor takes audit events. Audit never blocks the caller for long: a
// writer buffers and drops (counting what it dropped) rather than stall
// a request.
type Auditor interface {
	Audit(e Event)
}

// NopAuditor drops every event: no audit trail configured.
type NopAuditor struct{}

// Audit implements Auditor.
func (NopAuditor) Audit(Event) {}
