package handler_test

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/handler"
	"github.com/berthmq/berth/internal/server"
)

// fixedAuthorizer answers every action with allow.
type fixedAuthorizer struct{ allow bool }

func (f fixedAuthorizer) Authorize(auth.Action) bool { return f.allow }

type recordingAuditor struct {
	mu     sync.Mutex
	events []auth.Event
}

func (r *recordingAuditor) Audit(e auth.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// A denial is answered with the resource type's error, counted by
// resource type and audited (Kind authorization, Allowed false, the API,
// operation and resource); an allowed change is audited as allowed.
func TestAuthorizationDenialCountedAndAudited(t *testing.T) {
	rec := &recordingAuditor{}
	b := handler.New(handler.Config{Authorizer: fixedAuthorizer{false}, Auditor: rec, Logger: quietLog})
	r := electReq(2, 0, "orders:0")
	reply, err := b.Handle(context.Background(), &server.Request{Key: 43, Version: 2, ClientID: "test", Body: r})
	if err != nil {
		t.Fatal(err)
	}
	if resp := reply().(*kmsg.ElectLeadersResponse); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("denied ElectLeaders answered %d", resp.ErrorCode)
	}
	if got := b.Denials()[kmsg.ACLResourceTypeCluster]; got != 1 {
		t.Fatalf("cluster denials %d, want 1 (%v)", got, b.Denials())
	}
	if len(rec.events) != 1 {
		t.Fatalf("events %+v", rec.events)
	}
	e := rec.events[0]
	if e.Kind != "authorization" || e.Allowed || e.Method != "ElectLeaders" || e.Operation != "ALTER" ||
		e.ResourceType != "CLUSTER" || e.ResourceName != "kafka-cluster" || e.Principal != auth.Anonymous ||
		e.Error != kerr.ClusterAuthorizationFailed.Message {
		t.Fatalf("denial event %+v", e)
	}

	rec2 := &recordingAuditor{}
	b2 := handler.New(handler.Config{Authorizer: fixedAuthorizer{true}, Auditor: rec2, Logger: quietLog})
	if _, err := b2.Handle(context.Background(), &server.Request{Key: 43, Version: 2, ClientID: "test", Body: electReq(2, 0, "orders:0")}); err != nil {
		t.Fatal(err)
	}
	if len(rec2.events) != 1 || !rec2.events[0].Allowed || rec2.events[0].Operation != "ALTER" {
		t.Fatalf("allowed admin action's events %+v", rec2.events)
	}
	if n := b2.Denials()[kmsg.ACLResourceTypeCluster]; n != 0 {
		t.Fatalf("denials counted for an allowed action: %d", n)
	}

	// Without an authorizer (AllowAll) nothing is audited.
	rec3 := &recordingAuditor{}
	b3 := handler.New(handler.Config{Auditor: rec3, Logger: quietLog})
	if _, err := b3.Handle(context.Background(), &server.Request{Key: 43, Version: 2, ClientID: "test", Body: electReq(2, 0, "orders:0")}); err != nil {
		t.Fatal(err)
	}
	if len(rec3.events) != 0 {
		t.Fatalf("events without an authorizer: %+v", rec3.events)
	}
}
