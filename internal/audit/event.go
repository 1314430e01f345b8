// Package audit is the audit trail's writer: it takes auth.Event values
// from the handlers (authentication, authorization decisions, management
// changes), turns each into a CloudEvents 1.0 JSON record whose data
// fields are named after Confluent's audit log, and appends them, keyed by
// principal, to the internal topic __berth_audit (replicated,
// cleanup.policy=delete, retention by audit.log.retention.ms) and
// optionally to a JSON-lines file.
//
// Audit never blocks a request: events go into a bounded buffer that one
// goroutine drains in batches; when it is full an event is dropped and
// counted (Metrics.Dropped, berth_audit_dropped_events_total).
// Data-plane authorization allows (READ, WRITE, DESCRIBE,
// IDEMPOTENT_WRITE) are aggregated: one event per (principal, client id,
// method, resource, operation) per audit.log.allow.aggregation.ms, with the
// count and the interval.
package audit

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/metadata"
)

// Topic is the audit trail's topic.
const Topic = metadata.AuditTopic

// CloudEvent is one audit record as stored: the CloudEvents 1.0 JSON
// envelope (specversion, id, source, type, time, subject,
// datacontenttype) around Data.
type CloudEvent struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Time            time.Time `json:"time"`
	Subject         string    `json:"subject,omitempty"`
	DataContentType string    `json:"datacontenttype"`
	Data            Data      `json:"data"`
}

// Data is an audit event's data, with Confluent's audit log field names
// (methodName, resourceName, authenticationInfo, authorizationInfo,
// requestMetadata, result) and Berth's additions (kind, details,
// aggregation).
type Data struct {
	ServiceName        string             `json:"serviceName"`
	MethodName         string             `json:"methodName"`
	ResourceName       string             `json:"resourceName,omitempty"`
	AuthenticationInfo AuthenticationInfo `json:"authenticationInfo"`
	AuthorizationInfo  *AuthorizationInfo `json:"authorizationInfo,omitempty"`
	RequestMetadata    RequestMetadata    `json:"requestMetadata"`
	Result             Result             `json:"result"`
	// Kind is the event's kind: authentication, authorization or
	// management.
	Kind    string            `json:"kind"`
	Details map[string]string `json:"details,omitempty"`
	// Aggregation is set on an aggregated data-plane allow: how many
	// decisions the event stands for and their interval.
	Aggregation *Aggregation `json:"aggregation,omitempty"`
}

// AuthenticationInfo is who acted.
type AuthenticationInfo struct {
	Principal string `json:"principal"`
	// Mechanism is the SASL mechanism (or SSL) of an authentication event.
	Mechanism string `json:"mechanism,omitempty"`
}

// AuthorizationInfo is the decision on a resource, Confluent's names:
// the operation and resource type in Kafka's camel case (Read, Topic).
type AuthorizationInfo struct {
	Granted      bool   `json:"granted"`
	Operation    string `json:"operation,omitempty"`
	ResourceType string `json:"resourceType,omitempty"`
	ResourceName string `json:"resourceName,omitempty"`
	PatternType  string `json:"patternType,omitempty"`
}

// RequestMetadata is where the request came from.
type RequestMetadata struct {
	ClientAddress string `json:"client_address,omitempty"`
	ClientID      string `json:"client_id,omitempty"`
	Listener      string `json:"listener,omitempty"`
}

// Result is the outcome: SUCCESS or FAILURE, and the Kafka error name.
type Result struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// Aggregation is the count and interval of an aggregated event.
type Aggregation struct {
	Count int64     `json:"count"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Status values of Result.
const (
	StatusSuccess = "SUCCESS"
	StatusFailure = "FAILURE"
)

// TypeOf is the CloudEvents type of an event: e.Type if set, else
// io.berth.kafka.<kind>.
func TypeOf(e auth.Event) string {
	if e.Type != "" {
		return e.Type
	}
	return "io.berth.kafka." + e.Kind
}

// Source is the CloudEvents source of a node's events.
func Source(clusterID string, node int32) string {
	return "berth://cluster/" + clusterID + "/node/" + strconv.Itoa(int(node))
}

// ResourceName is the resource's name in Confluent's CRN style under
// the cluster: berth://cluster/<id>/topic=orders; the cluster itself
// when the event names no resource.
func ResourceName(clusterID, typ, name string) string {
	base := "berth://cluster/" + clusterID
	t := CamelCase(typ)
	if t == "" || strings.EqualFold(t, "Cluster") {
		return base
	}
	return base + "/" + strings.ToLower(t[:1]) + t[1:] + "=" + name
}

// CamelCase turns Kafka's enum names into Confluent's: READ → Read,
// ALTER_CONFIGS → AlterConfigs, TRANSACTIONAL_ID → TransactionalId. A
// name already in camel case is kept.
func CamelCase(s string) string {
	if s == "" || strings.ToUpper(s) != s {
		return s
	}
	var b strings.Builder
	for _, w := range strings.Split(strings.ToLower(s), "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// Normalize makes an operation or resource type comparable whatever its
// spelling (READ, Read, read; ALTER_CONFIGS, AlterConfigs).
func Normalize(s string) string {
	return strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(s, "_", ""), "-", ""))
}

// Build makes the CloudEvent of e for the node of src in cluster.
func Build(e auth.Event, clusterID, src string, agg *Aggregation) CloudEvent {
	t := e.Time
	if t.IsZero() {
		t = time.Now()
	}
	d := Data{
		ServiceName:        "berth://cluster/" + clusterID,
		MethodName:         method(e),
		AuthenticationInfo: AuthenticationInfo{Principal: principal(e)},
		RequestMetadata:    RequestMetadata{ClientAddress: e.Host, ClientID: e.ClientID, Listener: e.Listener},
		Result:             Result{Status: StatusSuccess, Message: e.Error},
		Kind:               e.Kind,
		Details:            e.Detail,
		Aggregation:        agg,
	}
	if !e.Allowed || e.Error != "" {
		d.Result.Status = StatusFailure
	}
	if e.Kind == "authorization" && !e.Allowed && e.Error == "" {
		d.Result.Message = deniedError(e.ResourceType)
	}
	if e.Kind == "authentication" {
		d.AuthenticationInfo.Mechanism = e.Method
	}
	if e.ResourceType != "" || e.Operation != "" {
		d.ResourceName = ResourceName(clusterID, e.ResourceType, e.ResourceName)
		pt := e.PatternType
		if pt == "" && e.ResourceType != "" {
			pt = "LITERAL"
		}
		d.AuthorizationInfo = &AuthorizationInfo{
			Granted:      e.Allowed,
			Operation:    CamelCase(e.Operation),
			ResourceType: CamelCase(e.ResourceType),
			ResourceName: e.ResourceName,
			PatternType:  pt,
		}
	}
	subject := d.ResourceName
	if subject == "" {
		subject = d.ServiceName
	}
	return CloudEvent{
		SpecVersion: "1.0", ID: newID(), Source: src, Type: TypeOf(e), Time: t.UTC(),
		Subject: subject, DataContentType: "application/json", Data: d,
	}
}

// deniedError is the Kafka error a denial on a resource type answers,
// for a denial recorded without one.
func deniedError(resourceType string) string {
	switch Normalize(resourceType) {
	case "topic":
		return "TOPIC_AUTHORIZATION_FAILED"
	case "group":
		return "GROUP_AUTHORIZATION_FAILED"
	case "transactionalid":
		return "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
	case "delegationtoken":
		return "DELEGATION_TOKEN_AUTHORIZATION_FAILED"
	}
	return "CLUSTER_AUTHORIZATION_FAILED"
}

// method is Confluent's methodName: kafka.<API> (kafka.CreateTopics);
// an authentication event's is kafka.Authentication.
func method(e auth.Event) string {
	switch {
	case e.Kind == "authentication":
		return "kafka.Authentication"
	case e.Method == "":
		return "kafka.Unknown"
	case strings.Contains(e.Method, "."):
		return e.Method
	}
	return "kafka." + e.Method
}

func principal(e auth.Event) string {
	if e.Principal.IsZero() {
		return auth.Anonymous.String()
	}
	return e.Principal.String()
}

// Encode is the stored form of a CloudEvent: its JSON.
func Encode(ce CloudEvent) []byte {
	b, _ := json.Marshal(ce) // only strings, bools, numbers, times: cannot fail
	return b
}

// Decode parses a stored CloudEvent.
func Decode(b []byte) (CloudEvent, error) {
	var ce CloudEvent
	err := json.Unmarshal(b, &ce)
	return ce, err
}

// newID is a random UUID (version 4), the event's CloudEvents id.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
