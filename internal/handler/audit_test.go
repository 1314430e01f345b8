package handler

import (
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/server"
)

type auditRecorder struct {
	mu  sync.Mutex
	evs []auth.Event
}

func (r *auditRecorder) Audit(e auth.Event) { r.mu.Lock(); r.evs = append(r.evs, e); r.mu.Unlock() }

// runAudited runs req's reply through auditReply and returns the events.
func runAudited(t *testing.T, key int16, req kmsg.Request, resp kmsg.Response, clientID string) []auth.Event {
	t.Helper()
	rec := &auditRecorder{}
	b := &Broker{Config: Config{Auditor: rec}, auditOn: true}
	r := b.auditReply(&server.Request{Key: key, Body: req, ClientID: clientID}, now(resp))
	if got := r(); got != resp {
		t.Fatalf("the audited reply answered %v, want the handler's response", got)
	}
	return rec.evs
}

// The keys served by other parts of issue 14 (SCRAM users, quotas, ACLs)
// are audited by key number, and secrets never reach an event.
func TestAuditSecretsAndKeysByNumber(t *testing.T) {
	scram := &kmsg.AlterUserSCRAMCredentialsRequest{
		Upsertions: []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: "alice", Mechanism: 2, Iterations: 8192, Salt: []byte("SALTSALT"), SaltedPassword: []byte("HUNTER2HASH")}},
		Deletions:  []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "bob", Mechanism: 1}},
	}
	evs := runAudited(t, 51, scram, &kmsg.AlterUserSCRAMCredentialsResponse{Results: []kmsg.AlterUserSCRAMCredentialsResponseResult{{User: "alice"}, {User: "bob", ErrorCode: 91}}}, "")
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	for _, e := range evs {
		for k, v := range e.Detail {
			if strings.Contains(v, "SALT") || strings.Contains(v, "HUNTER2") || strings.Contains(k, "salt") {
				t.Errorf("a SCRAM secret in the event: %s=%s", k, v)
			}
		}
		if e.ResourceType != "USER" || e.Kind != "management" || e.Method != kmsg.NameForKey(51) {
			t.Errorf("event %+v", e)
		}
	}
	if evs[0].ResourceName != "bob" || evs[0].Detail["mechanism"] != "SCRAM-SHA-256" || evs[0].Error != "RESOURCE_NOT_FOUND" ||
		evs[1].ResourceName != "alice" || evs[1].Detail["mechanism"] != "SCRAM-SHA-512" || evs[1].Error != "" {
		t.Errorf("events %+v", evs)
	}

	pw := "s3cret"
	retention := "1000"
	cfg := &kmsg.IncrementalAlterConfigsRequest{Resources: []kmsg.IncrementalAlterConfigsRequestResource{{
		ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "",
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{
			{Name: "listener.name.sasl_ssl.ssl.key.password", Value: &pw},
			{Name: "listener.name.sasl_ssl.plain.sasl.jaas.config", Value: &pw},
			{Name: "log.retention.ms", Value: &retention},
		},
	}}}
	evs = runAudited(t, 44, cfg, &kmsg.IncrementalAlterConfigsResponse{Resources: []kmsg.IncrementalAlterConfigsResponseResource{{ResourceType: kmsg.ConfigResourceTypeBroker}}}, "")
	if len(evs) != 1 || evs[0].ResourceType != "CLUSTER" || evs[0].Detail["config.log.retention.ms"] != "1000" ||
		evs[0].Detail["config.listener.name.sasl_ssl.ssl.key.password"] != "[redacted]" ||
		evs[0].Detail["config.listener.name.sasl_ssl.plain.sasl.jaas.config"] != "[redacted]" {
		t.Errorf("config events %+v", evs)
	}

	quota := &kmsg.AlterClientQuotasRequest{Entries: []kmsg.AlterClientQuotasRequestEntry{{
		Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr("meridian")}},
		Ops:    []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1048576}},
	}}}
	evs = runAudited(t, 49, quota, &kmsg.AlterClientQuotasResponse{Entries: []kmsg.AlterClientQuotasResponseEntry{{}}}, "")
	if len(evs) != 1 || evs[0].ResourceName != "user=meridian" || evs[0].Detail["quota.producer_byte_rate"] != "1048576" {
		t.Errorf("quota events %+v", evs)
	}

	acls := &kmsg.CreateACLsRequest{Creations: []kmsg.CreateACLsRequestCreation{{
		ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "orders", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:harbor-retail", Host: "*", Operation: kmsg.ACLOperationWrite, PermissionType: kmsg.ACLPermissionTypeAllow,
	}}}
	evs = runAudited(t, 30, acls, &kmsg.CreateACLsResponse{Results: []kmsg.CreateACLsResponseResult{{}}}, "")
	if len(evs) != 1 || evs[0].ResourceType != "TOPIC" || evs[0].ResourceName != "orders" || evs[0].PatternType != "LITERAL" ||
		evs[0].Detail["acl.principal"] != "User:harbor-retail" || evs[0].Detail["acl.operation"] != "WRITE" ||
		!evs[0].Allowed || evs[0].Error != "" {
		t.Errorf("ACL events %+v", evs)
	}
	// A refusal by the authorizer is its event (authorize.go), not a
	// second, management one.
	if evs = runAudited(t, 30, acls, &kmsg.CreateACLsResponse{Results: []kmsg.CreateACLsResponseResult{{ErrorCode: 31}}}, ""); len(evs) != 0 {
		t.Errorf("refused ACL creation audited as a change too: %+v", evs)
	}

	del := &kmsg.DeleteACLsRequest{Filters: []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeAny}}}
	evs = runAudited(t, 31, del, &kmsg.DeleteACLsResponse{Results: []kmsg.DeleteACLsResponseResult{{MatchingACLs: []kmsg.DeleteACLsResponseResultMatchingACL{
		{ResourceType: kmsg.ACLResourceTypeGroup, ResourceName: "g", Principal: "User:x", Host: "*", Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow},
		{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "t", Principal: "User:x", Host: "*", Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeDeny},
	}}}}, "")
	if len(evs) != 2 || evs[0].ResourceName != "g" || evs[1].Detail["acl.permission"] != "DENY" || evs[1].Detail["action"] != "delete" {
		t.Errorf("ACL deletion events %+v", evs)
	}
}

// A produce to the audit topic (the writer's own) is not audited; other
// topics' writes are allows; refused partitions are not.
func TestAuditProduceAllows(t *testing.T) {
	resp := &kmsg.ProduceResponse{Topics: []kmsg.ProduceResponseTopic{
		{Topic: "__berth_audit", Partitions: []kmsg.ProduceResponseTopicPartition{{}}},
		{Topic: "orders", Partitions: []kmsg.ProduceResponseTopicPartition{{}}},
		{Topic: "secret", Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorCode: 29}}},
	}}
	evs := runAudited(t, 0, &kmsg.ProduceRequest{}, resp, "app")
	if len(evs) != 1 || evs[0].ResourceName != "orders" || evs[0].Operation != "WRITE" || !evs[0].Allowed || evs[0].Kind != "authorization" || evs[0].ClientID != "app" {
		t.Errorf("produce events %+v", evs)
	}
}

// With the audit trail off the reply is not wrapped.
func TestAuditOffLeavesReply(t *testing.T) {
	b := &Broker{Config: Config{Auditor: auth.NopAuditor{}}}
	called := 0
	r := server.Reply(func() kmsg.Response { called++; return &kmsg.CreateTopicsResponse{} })
	w := b.auditReply(&server.Request{Key: 19, Body: &kmsg.CreateTopicsRequest{}}, r)
	w()
	if called != 1 {
		t.Fatal("reply not run once")
	}
}
