package tests

import (
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// startSecured runs a node with Berth's authorizer on, User:admin a super
// user, and every client acting as User:<its client id> (the test hook
// that stands in for SASL).
func startSecured(t *testing.T, opts ...tc.Option) *tc.Node {
	t.Helper()
	n := tc.Start(t, append([]tc.Option{
		tc.With("authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
		tc.With("super.users", "User:admin;User:berth-broker-1"), // the node itself: its peer client id (the test hook names it)
	}, opts...)...)
	n.TestPrincipals(func(clientID string) (auth.Principal, bool) { return auth.User(clientID), true })
	return n
}

func as(t *testing.T, n *tc.Node, principal string, opts ...kgo.Opt) *kgo.Client {
	return tc.Client(t, n.Addr(), append([]kgo.Opt{kgo.ClientID(principal)}, opts...)...)
}

func mustCreateACLs(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(ctxT(t, 30*time.Second), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create acl %+v: %v %s", r, r.Err, r.ErrMessage)
		}
	}
}

// A producer, a consumer and a stranger against ACLs made with kadm, as
// kafka-acls.sh makes them: each may do what its ACLs allow and nothing
// else, and deleting an ACL takes the right away.
func TestACLsProducerConsumer(t *testing.T) {
	n := startSecured(t)
	ctx := ctxT(t, 60*time.Second)
	admin := kadm.NewClient(as(t, n, "admin"))
	if r, err := admin.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil || r.Err != nil {
		t.Fatalf("admin creates a topic: %v %v", err, r.Err)
	}
	mustCreateACLs(t, admin, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite))
	mustCreateACLs(t, admin, kadm.NewACLs().Allow("User:bob").Topics("ord").
		ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))
	mustCreateACLs(t, admin, kadm.NewACLs().Allow("User:bob").Groups("billing").Operations(kadm.OpRead))

	alice := as(t, n, "alice", kgo.DefaultProduceTopic("orders"))
	produceSync(t, alice, &kgo.Record{Value: []byte("paid")})

	mallory := as(t, n, "mallory", kgo.DefaultProduceTopic("orders"), kgo.RecordRetries(1))
	err := mallory.ProduceSync(ctx, &kgo.Record{Value: []byte("forged")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("a stranger's produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// Metadata hides what a principal may not describe.
	if topics, err := kadm.NewClient(mallory).ListTopics(ctx); err != nil || topics.Has("orders") {
		t.Fatalf("the stranger lists %v (%v)", topics.Names(), err)
	}
	if topics, err := kadm.NewClient(as(t, n, "bob")).ListTopics(ctx); err != nil || !topics.Has("orders") {
		t.Fatalf("bob (READ on ord*) lists %v (%v)", topics.Names(), err)
	}

	recs := consumeN(t, n.Addr(), "orders", 1, kgo.ClientID("bob"), kgo.ConsumerGroup("billing"))
	if string(recs[0].Value) != "paid" {
		t.Fatalf("bob read %q", recs[0].Value)
	}
	// Without READ on the group, a consumer group is refused.
	cl := as(t, n, "bob", kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("other"))
	pollCtx := ctxT(t, 10*time.Second)
	var groupErr error
	for groupErr == nil && pollCtx.Err() == nil {
		cl.PollFetches(pollCtx).EachError(func(_ string, _ int32, err error) { groupErr = err })
	}
	if !errors.Is(groupErr, kerr.GroupAuthorizationFailed) {
		t.Fatalf("bob in group other: %v, want GROUP_AUTHORIZATION_FAILED", groupErr)
	}

	// Only a principal with ALTER on the cluster changes ACLs.
	if res, err := kadm.NewClient(as(t, n, "alice")).CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").
		Topics("*").Operations(kadm.OpAll)); err != nil || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice grants herself everything: %v %v", err, res)
	}

	described, err := admin.DescribeACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().AnyResource().
		ResourcePatternType(kadm.ACLPatternMatch).Operations(kadm.OpAny))
	if err != nil || len(described) != 1 || len(described[0].Described) != 1 || described[0].Described[0].Name != "orders" {
		t.Fatalf("describe alice's acls: %v %+v", err, described)
	}
	deleted, err := admin.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").Operations(kadm.OpWrite))
	if err != nil || len(deleted) != 1 || len(deleted[0].Deleted) != 1 {
		t.Fatalf("delete alice's acl: %v %+v", err, deleted)
	}
	alice2 := as(t, n, "alice", kgo.DefaultProduceTopic("orders"), kgo.RecordRetries(1))
	if err := alice2.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice after her ACL was deleted: %v", err)
	}
}

// Without an authorizer the ACL APIs answer SECURITY_DISABLED, as Kafka's.
func TestACLsSecurityDisabled(t *testing.T) {
	n := tc.Start(t)
	adm := tc.Admin(t, n.Addr())
	res, err := adm.CreateACLs(ctxT(t, 30*time.Second), kadm.NewACLs().Allow("User:a").Topics("t").Operations(kadm.OpRead))
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("create acls without an authorizer: %v %+v", err, res)
	}
	dres, err := adm.DescribeACLs(ctxT(t, 30*time.Second), kadm.NewACLs().Allow().AllowHosts().AnyResource().Operations(kadm.OpAny))
	if err != nil || len(dres) != 1 || !errors.Is(dres[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("describe acls without an authorizer: %v %+v", err, dres)
	}
}

// kafka-python's KafkaAdminClient create_acls, describe_acls (by
// principal and MATCH) and delete_acls, as an admin.
func TestKafkaPythonACLs(t *testing.T) {
	py := need(t, "/usr/bin/python3")
	if exec.Command(py, "-c", "import kafka").Run() != nil {
		need(t, "/nonexistent/python3-kafka")
	}
	n := startSecured(t)
	out := run(t, "", py, "testdata/kafkapython_acls.py", n.Addr(), "admin")
	if !strings.Contains(out, "\nok") {
		t.Fatalf("kafka-python acl calls: %q", out)
	}
}

// The recipes of docs/security.md, each with only the ACLs it lists: an
// idempotent producer (WRITE on the topic lets it InitProducerId), a
// transactional producer on a prefixed transactional id, a share-group
// worker, topic auto-creation with CREATE, authorized operations, and the
// denials metric.
func TestACLRecipes(t *testing.T) {
	n := startSecured(t, tc.With("auto.create.topics.enable", "true"))
	ctx := ctxT(t, 90*time.Second)
	admin := kadm.NewClient(as(t, n, "admin"))
	for _, topic := range []string{"orders", "invoices", "shipments"} {
		if r, err := admin.CreateTopic(ctx, 1, 1, nil, topic); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, r.Err)
		}
	}
	// Producer recipe: kgo is idempotent by default.
	mustCreateACLs(t, admin, kadm.NewACLs().Allow("User:pos").Topics("orders").
		Operations(kadm.OpWrite, kadm.OpDescribe, kadm.OpCreate))
	produceSync(t, as(t, n, "pos", kgo.DefaultProduceTopic("orders")), &kgo.Record{Value: []byte("o1")})
	// READ only: InitProducerId is refused (no IDEMPOTENT_WRITE, no WRITE anywhere).
	mustCreateACLs(t, admin, kadm.NewACLs().Allow("User:reader").Topics("orders").Operations(kadm.OpRead))
	reader := as(t, n, "reader", kgo.DefaultProduceTopic("orders"), kgo.RecordRetries(1))
	if err := reader.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("idempotent produce with READ only: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}

	// A transactional batch needs WRITE on a transactional id, so a
	// request without one cannot open a transaction (Kafka's rule).
	pos := as(t, n, "pos")
	if p := rawProduce(t, pos, "orders", txnBatch(5000, 0, 0, "sneaky")); p.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("a transactional batch without a transactional id: %v", kerr.ErrorForCode(p.ErrorCode))
	}

	// Transactional producer recipe: ids orders-etl-*, writes invoices.
	mustCreateACLs(t, admin, kadm.NewACLs().Allow("User:etl").TransactionalIDs("orders-etl-").
		ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite, kadm.OpDescribe))
	mustCreateACLs(t, admin, kadm.NewACLs().Allow("User:etl").Topics("invoices").Operations(kadm.OpWrite, kadm.OpDescribe))
	txp := as(t, n, "etl", kgo.TransactionalID("orders-etl-1"), kgo.DefaultProduceTopic("invoices"))
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, txp, &kgo.Record{Value: []byte("inv")})
	if err := txp.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	other := as(t, n, "etl", kgo.TransactionalID("other-1"), kgo.DefaultProduceTopic("invoices"))
	var err error
	err = other.BeginTransaction() // kgo's InitProducerId runs first
	if err == nil {
		err = other.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	}
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("a transactional id outside the prefix: %v", err)
	}

	// Share-group worker recipe: READ on the topic and the share group.
	mustCreateACLs(t, admin, kadm.NewACLs().Allow("User:shipper").Topics("shipments").Groups("shippers").Operations(kadm.OpRead))
	worker := shareConsumer(t, n.Addr(), "shippers", "shipments", kgo.ClientID("shipper"))
	warmShare(t, as(t, n, "admin"), worker, "shipments")

	// Auto-creation through Metadata needs CREATE (here on the topic prefix).
	auto := kadm.NewClient(as(t, n, "pos"))
	md := kmsg.NewPtrMetadataRequest()
	md.AllowAutoTopicCreation = true
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders-auto")}}
	if resp, err := md.RequestWith(ctx, as(t, n, "pos")); err != nil || resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("auto-create without CREATE: %v %+v", err, resp)
	}
	mustCreateACLs(t, admin, kadm.NewACLs().Allow("User:pos").Topics("orders-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpCreate, kadm.OpWrite))
	poll.Until(t, 10*time.Second, func() error {
		resp, err := md.RequestWith(ctx, as(t, n, "pos"))
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	})
	if td, err := auto.ListTopics(ctx, "orders-auto"); err != nil || td["orders-auto"].Err != nil {
		t.Fatalf("auto-created topic: %v %v", err, td)
	}

	// authorized_operations: pos has WRITE, DESCRIBE and CREATE on orders.
	var resp *kmsg.MetadataResponse
	md2 := kmsg.NewPtrMetadataRequest()
	md2.IncludeTopicAuthorizedOperations, md2.IncludeClusterAuthorizedOperations = true, true
	md2.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	resp, err = md2.RequestWith(ctx, as(t, n, "pos"))
	if err != nil {
		t.Fatal(err)
	}
	want := int32(1<<kmsg.ACLOperationWrite | 1<<kmsg.ACLOperationDescribe | 1<<kmsg.ACLOperationCreate)
	if got := resp.Topics[0].AuthorizedOperations; got != want {
		t.Fatalf("pos's authorized operations on orders %b, want %b", got, want)
	}

	// The denials so far are counted by resource type.
	hr, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(hr.Body)
	hr.Body.Close()
	for _, typ := range []string{"TOPIC", "CLUSTER", "TRANSACTIONAL_ID"} {
		if !strings.Contains(string(body), `berth_authorization_denials_total{resource_type="`+typ+`"} `) ||
			strings.Contains(string(body), `berth_authorization_denials_total{resource_type="`+typ+`"} 0`+"\n") {
			t.Errorf("/metrics counts no %s denial", typ)
		}
	}
}

// CreateAcls checks each binding as Kafka does and answers each one:
// valid ones are created, the others get INVALID_REQUEST with the reason;
// DescribeAcls refuses a filter with UNKNOWN values.
func TestCreateACLsValidation(t *testing.T) {
	n := startSecured(t)
	ctx := ctxT(t, 30*time.Second)
	admin := as(t, n, "admin")
	c := func(typ kmsg.ACLResourceType, name string, pat kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation) kmsg.CreateACLsRequestCreation {
		return kmsg.CreateACLsRequestCreation{ResourceType: typ, ResourceName: name, ResourcePatternType: pat, Principal: principal,
			Host: "*", Operation: op, PermissionType: kmsg.ACLPermissionTypeAllow}
	}
	lit, pre := kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	cases := []struct {
		c  kmsg.CreateACLsRequestCreation
		ok bool
	}{
		{c(kmsg.ACLResourceTypeTopic, "t", pre, "User:a", kmsg.ACLOperationRead), true},
		{c(kmsg.ACLResourceTypeTransactionalId, "x", lit, "User:a", kmsg.ACLOperationCreate), false}, // not a TRANSACTIONAL_ID operation
		{c(kmsg.ACLResourceTypeCluster, "other", lit, "User:a", kmsg.ACLOperationAlter), false},      // only kafka-cluster
		{c(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeMatch, "User:a", kmsg.ACLOperationRead), false},
		{c(kmsg.ACLResourceTypeTopic, "t", lit, "alice", kmsg.ACLOperationRead), false}, // no principal type
		{c(kmsg.ACLResourceTypeTopic, "t", lit, "User:a", kmsg.ACLOperationAny), false},
		{c(kmsg.ACLResourceTypeAny, "t", lit, "User:a", kmsg.ACLOperationRead), false},
		{c(kmsg.ACLResourceTypeTopic, "", lit, "User:a", kmsg.ACLOperationRead), false},
		{c(kmsg.ACLResourceTypeDelegationToken, "tok", lit, "User:a", kmsg.ACLOperationDescribe), true},
		{c(kmsg.ACLResourceTypeUser, "User:bob", lit, "User:a", kmsg.ACLOperationDescribeTokens), true},
		{c(kmsg.ACLResourceTypeCluster, "kafka-cluster", lit, "User:a", kmsg.ACLOperationIdempotentWrite), true},
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, tc := range cases {
		req.Creations = append(req.Creations, tc.c)
	}
	resp, err := req.RequestWith(ctx, admin)
	if err != nil || len(resp.Results) != len(cases) {
		t.Fatalf("%v %+v", err, resp)
	}
	for i, r := range resp.Results {
		switch {
		case cases[i].ok && r.ErrorCode != 0:
			t.Errorf("creation %d (%+v) refused: %v %v", i, cases[i].c, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		case !cases[i].ok && (r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil):
			t.Errorf("creation %d (%+v): code %d, want INVALID_REQUEST with a reason", i, cases[i].c, r.ErrorCode)
		}
	}
	d := kmsg.NewPtrDescribeACLsRequest()
	d.ResourceType, d.ResourcePatternType, d.Operation, d.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dr, err := d.RequestWith(ctx, admin)
	if err != nil || dr.ErrorCode != 0 || len(dr.Resources) != 4 {
		t.Fatalf("describe all: %v %+v", err, dr)
	}
	d.ResourceType = kmsg.ACLResourceTypeUnknown
	if dr, err := d.RequestWith(ctx, admin); err != nil || dr.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("describe with an UNKNOWN resource type: %v %+v", err, dr)
	}
}
