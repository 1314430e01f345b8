package audit

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/auth"
)

func denial() auth.Event {
	return auth.Event{
		Time: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC), Principal: auth.User("svc-meridian-pos"),
		Host: "10.0.0.7:51000", Listener: "SASL_SSL", ClientID: "pos-1", Kind: KindAuthorization,
		Method: "Produce", Operation: "WRITE", ResourceType: "TOPIC", ResourceName: "orders",
		Allowed: false, Error: "TOPIC_AUTHORIZATION_FAILED",
	}
}

// The stored record is a CloudEvents 1.0 envelope with Confluent's data
// field names, as consumers of Confluent's audit log expect them.
func TestCloudEventShape(t *testing.T) {
	b := Encode(Build(denial(), "c1", Source("c1", 2), nil))
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"specversion": "1.0", "source": "berth://cluster/c1/node/2", "type": "io.berth.kafka.authorization",
		"time": "2026-11-24T10:00:00Z", "subject": "berth://cluster/c1/topic=orders", "datacontenttype": "application/json",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if id, _ := m["id"].(string); len(id) != 36 {
		t.Errorf("id %q: want a UUID", id)
	}
	d := m["data"].(map[string]any)
	get := func(path string) any {
		var cur any = d
		for _, p := range strings.Split(path, ".") {
			cur = cur.(map[string]any)[p]
		}
		return cur
	}
	for path, v := range map[string]any{
		"methodName":                     "kafka.Produce",
		"resourceName":                   "berth://cluster/c1/topic=orders",
		"authenticationInfo.principal":   "User:svc-meridian-pos",
		"authorizationInfo.granted":      false,
		"authorizationInfo.operation":    "Write",
		"authorizationInfo.resourceType": "Topic",
		"authorizationInfo.resourceName": "orders",
		"authorizationInfo.patternType":  "LITERAL",
		"requestMetadata.client_address": "10.0.0.7:51000",
		"requestMetadata.client_id":      "pos-1",
		"result.status":                  "FAILURE",
		"result.message":                 "TOPIC_AUTHORIZATION_FAILED",
		"kind":                           "authorization",
	} {
		if got := get(path); got != v {
			t.Errorf("data.%s = %v, want %v", path, got, v)
		}
	}
	// An authentication event names its mechanism and no resource.
	ce := Build(auth.Event{Kind: KindAuthentication, Method: "SCRAM-SHA-512", Principal: auth.User("alice"), Error: "SASL_AUTHENTICATION_FAILED"}, "c1", "s", nil)
	if ce.Type != "io.berth.kafka.authentication" || ce.Data.MethodName != "kafka.Authentication" ||
		ce.Data.AuthenticationInfo.Mechanism != "SCRAM-SHA-512" || ce.Data.AuthorizationInfo != nil || ce.Data.Result.Status != StatusFailure {
		t.Errorf("authentication event: %+v", ce)
	}
	if ce := Build(auth.Event{Kind: KindAuthorization, Operation: "READ", ResourceType: "GROUP", ResourceName: "g"}, "c1", "s", nil); ce.Data.Result.Message != "GROUP_AUTHORIZATION_FAILED" {
		t.Errorf("a denial recorded without its error: result %+v", ce.Data.Result)
	}
	if ce := Build(auth.Event{Kind: KindManagement, Type: "io.berth.dlq.purge", Allowed: true}, "c1", "s", nil); ce.Type != "io.berth.dlq.purge" || ce.Data.Result.Status != StatusSuccess {
		t.Errorf("typed event: %+v", ce)
	}
}

// A full buffer drops events and counts them; Audit never blocks.
func TestDropsCountedWhenBufferFull(t *testing.T) {
	w := New(Config{Buffer: 2}) // not started: nothing drains the buffer
	done := make(chan struct{})
	go func() {
		for i := 0; i < 10; i++ {
			w.Audit(denial())
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Audit blocked on a full buffer")
	}
	if got := w.Metrics.Dropped.Load(); got != 8 {
		t.Fatalf("dropped %d events, want 8", got)
	}
	if got := w.Metrics.Events.Load(); got != 10 {
		t.Fatalf("events %d, want 10", got)
	}
}

// The file sink gets every event as a JSON line; data-plane allows are
// aggregated into one event with the count and interval; kinds not
// configured are not recorded.
func TestFileSinkAndAggregation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w := New(Config{File: path, AggregateEvery: time.Hour, NodeID: 1, ClusterID: func() string { return "c1" },
		Kinds: map[string]bool{KindAuthorization: true, KindManagement: true}})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	w.Audit(denial())
	read := auth.Event{Principal: auth.User("billing"), ClientID: "b", Kind: KindAuthorization, Method: "Fetch",
		Operation: "READ", ResourceType: "TOPIC", ResourceName: "orders", Allowed: true}
	for i := 0; i < 5; i++ {
		w.Audit(read)
	}
	w.Audit(auth.Event{Kind: KindAuthentication, Principal: auth.User("x")}) // not configured
	w.Audit(auth.Event{Kind: KindManagement, Method: "CreateTopics", Operation: "CREATE", ResourceType: "TOPIC", ResourceName: "t", Allowed: true})
	w.Close()

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []CloudEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ce, err := Decode(sc.Bytes())
		if err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ce)
	}
	if len(evs) != 3 {
		t.Fatalf("%d events in the file, want 3 (denial, management, one aggregate): %+v", len(evs), evs)
	}
	var agg *CloudEvent
	for i := range evs {
		if evs[i].Data.Kind == KindAuthentication {
			t.Errorf("authentication event recorded though not configured")
		}
		if evs[i].Data.Aggregation != nil {
			agg = &evs[i]
		}
	}
	if agg == nil {
		t.Fatal("no aggregated event")
	}
	a := agg.Data.Aggregation
	if a.Count != 5 || a.End.Before(a.Start) || agg.Data.AuthenticationInfo.Principal != "User:billing" ||
		agg.Data.AuthorizationInfo.Operation != "Read" || agg.Data.AuthorizationInfo.ResourceName != "orders" || !agg.Data.AuthorizationInfo.Granted {
		t.Fatalf("aggregate: %+v %+v", agg.Data, a)
	}
	if w.Metrics.Errors.Load() != 0 {
		t.Fatalf("%d write errors", w.Metrics.Errors.Load())
	}
}

func TestCamelCase(t *testing.T) {
	for in, want := range map[string]string{"READ": "Read", "ALTER_CONFIGS": "AlterConfigs", "TRANSACTIONAL_ID": "TransactionalId", "Topic": "Topic", "": ""} {
		if got := CamelCase(in); got != want {
			t.Errorf("CamelCase(%q) = %q, want %q", in, got, want)
		}
	}
	if Normalize("ALTER_CONFIGS") != Normalize("AlterConfigs") {
		t.Error("Normalize differs for two spellings of one operation")
	}
}
