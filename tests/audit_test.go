package tests

// The audit trail end to end: a broker with audit.log.enable=true records
// admin changes made through kadm (with their outcome), the reads and
// writes of a producer and a consumer (aggregated), and authorization
// denials fed through the handler's Auditor (as the authorizer will
// send them), in __berth_audit; `berth audit search` finds them by each
// filter.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/audit"
	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/cli"
	"github.com/berthmq/berth/internal/poll"
	"github.com/berthmq/berth/internal/testcluster"
)

// auditSearch runs `berth audit search` in-process with --json and
// returns the events.
func auditSearch(t *testing.T, addr string, args ...string) []audit.CloudEvent {
	t.Helper()
	out, err := runAuditSearch(addr, append(args, "--json")...)
	if err != nil {
		t.Fatalf("berth audit search %v: %v", args, err)
	}
	var evs []audit.CloudEvent
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		ce, err := audit.Decode([]byte(l))
		if err != nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		evs = append(evs, ce)
	}
	return evs
}

func runAuditSearch(addr string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cli.Run(ctx, append([]string{"audit", "search", "-b", addr, "--timeout", "10s"}, args...), strings.NewReader(""), &out, &errb)
	if err != nil {
		return out.String(), fmt.Errorf("%w (stderr: %s)", err, errb.String())
	}
	return out.String(), nil
}

func TestAuditSearch(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	n := testcluster.Start(t,
		testcluster.With("audit.log.enable", "true"),
		testcluster.With("audit.log.allow.aggregation.ms", "100"),
		testcluster.With("audit.log.retention.ms", "86400000"),
		testcluster.With("audit.log.file", file),
	)
	addr := n.KafkaAddr()
	n.TestPrincipals(func(clientID string) (auth.Principal, bool) {
		switch clientID {
		case "alice-admin":
			return auth.User("alice"), true
		case "bob-app":
			return auth.User("bob"), true
		}
		return auth.Principal{}, false
	})
	ctx := ctxT(t, 2*time.Minute)

	// Admin changes by alice, with one failure.
	acl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("alice-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	adm := kadm.NewClient(acl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if r, _ := adm.CreateTopic(ctx, 2, 1, nil, "orders"); r.Err == nil {
		t.Fatal("creating orders twice succeeded")
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "scratch"); err != nil {
		t.Fatal(err)
	}
	ret := "3600000"
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &ret}}, "orders"); err != nil || rs[0].Err != nil {
		t.Fatalf("alter configs: %v %v", err, rs)
	}
	secret := "org.apache.kafka.common.security.plain.PlainLoginModule required user_admin=\"hunter2\";"
	_, _ = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "listener.name.sasl_plaintext.plain.sasl.jaas.config", Value: &secret}})
	if _, err := adm.DeleteTopics(ctx, "scratch"); err != nil {
		t.Fatal(err)
	}

	// Bob writes and reads orders.
	bcl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("bob-app"), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer bcl.Close()
	produceSync(t, bcl, &kgo.Record{Value: []byte("o1")}, &kgo.Record{Value: []byte("o2")})
	consumeN(t, addr, "orders", 2, kgo.ClientID("bob-app"))

	// A denial, as the authorizer records it.
	n.Auditor().Audit(auth.Event{Principal: auth.User("svc-meridian-pos"), Host: "10.0.0.9:4000", ClientID: "pos",
		Kind: "authorization", Method: "Produce", Operation: "WRITE", ResourceType: "TOPIC", ResourceName: "orders",
		Error: "TOPIC_AUTHORIZATION_FAILED"})

	// Everything reaches __berth_audit.
	var mgmt []audit.CloudEvent
	poll.Until(t, 30*time.Second, func() error {
		mgmt = auditSearch(t, addr, "--principal", "User:alice", "--type", "management")
		if len(mgmt) < 6 {
			return fmt.Errorf("%d management events of alice", len(mgmt))
		}
		if reads := auditSearch(t, addr, "--resource", "topic:orders", "--operation", "read", "--principal", "bob"); len(reads) == 0 {
			return fmt.Errorf("no read of orders by bob yet")
		}
		return nil
	})
	type key struct{ method, op, res, status string }
	got := map[key]audit.CloudEvent{}
	for _, ce := range mgmt {
		a := ce.Data.AuthorizationInfo
		if a == nil {
			t.Fatalf("management event without authorizationInfo: %+v", ce)
		}
		got[key{ce.Data.MethodName, a.Operation, a.ResourceType + ":" + a.ResourceName, ce.Data.Result.Status}] = ce
		if ce.Data.RequestMetadata.ClientID != "alice-admin" || !strings.HasPrefix(ce.Data.RequestMetadata.ClientAddress, "127.0.0.1:") {
			t.Errorf("requestMetadata %+v", ce.Data.RequestMetadata)
		}
	}
	for _, k := range []key{
		{"kafka.CreateTopics", "Create", "Topic:orders", audit.StatusSuccess},
		{"kafka.CreateTopics", "Create", "Topic:orders", audit.StatusFailure},
		{"kafka.CreateTopics", "Create", "Topic:scratch", audit.StatusSuccess},
		{"kafka.IncrementalAlterConfigs", "AlterConfigs", "Topic:orders", audit.StatusSuccess},
		{"kafka.DeleteTopics", "Delete", "Topic:scratch", audit.StatusSuccess},
	} {
		if _, ok := got[k]; !ok {
			t.Errorf("no event %+v among %v", k, got)
		}
	}
	if ce := got[key{"kafka.CreateTopics", "Create", "Topic:orders", audit.StatusFailure}]; ce.Data.Result.Message != "TOPIC_ALREADY_EXISTS" {
		t.Errorf("failed CreateTopics: result %+v", ce.Data.Result)
	}
	if ce := got[key{"kafka.IncrementalAlterConfigs", "AlterConfigs", "Topic:orders", audit.StatusSuccess}]; ce.Data.Details["config.retention.ms"] != "3600000" {
		t.Errorf("config change details %v", ce.Data.Details)
	}
	if ce := got[key{"kafka.CreateTopics", "Create", "Topic:orders", audit.StatusSuccess}]; ce.Data.Details["partitions"] != "2" {
		t.Errorf("create details %v", ce.Data.Details)
	}

	redacted := false
	for _, ce := range mgmt {
		if ce.Data.Details["config.listener.name.sasl_plaintext.plain.sasl.jaas.config"] == "[redacted]" {
			redacted = true
		}
	}
	if !redacted {
		t.Errorf("the JAAS config change is not recorded with its value redacted: %+v", mgmt)
	}

	// Who read orders: bob, aggregated, with the interval.
	reads := auditSearch(t, addr, "--resource", "topic:orders", "--operation", "read", "--since", "1h")
	for _, ce := range reads {
		if ce.Data.AuthenticationInfo.Principal != "User:bob" || ce.Data.Aggregation == nil || ce.Data.Aggregation.Count < 1 ||
			ce.Data.MethodName != "kafka.Fetch" || !ce.Data.AuthorizationInfo.Granted {
			t.Errorf("read event %+v %+v", ce.Data, ce.Data.Aggregation)
		}
	}
	if writes := auditSearch(t, addr, "--resource", "topic:orders", "--operation", "write", "--allowed"); len(writes) == 0 || writes[0].Data.AuthenticationInfo.Principal != "User:bob" {
		t.Errorf("writes of orders: %+v", writes)
	}

	// Denials only: the refused producer.
	denied := auditSearch(t, addr, "--denied")
	if len(denied) != 1 || denied[0].Data.AuthenticationInfo.Principal != "User:svc-meridian-pos" || denied[0].Data.Result.Message != "TOPIC_AUTHORIZATION_FAILED" {
		t.Errorf("--denied: %+v", denied)
	}
	if evs := auditSearch(t, addr, "--resource", "topic:orders", "--principal", "User:svc-meridian-pos", "--type", "authorization"); len(evs) != 1 {
		t.Errorf("the refused attempt by resource and principal: %d events", len(evs))
	}

	// Time range and limit.
	if evs := auditSearch(t, addr, "--since", "2020-01-01", "--until", "2020-01-02"); len(evs) != 0 {
		t.Errorf("--since/--until in 2020: %d events", len(evs))
	}
	if evs := auditSearch(t, addr, "--until", time.Now().Add(-time.Hour).Format(time.RFC3339)); len(evs) != 0 {
		t.Errorf("--until an hour ago: %d events", len(evs))
	}
	if evs := auditSearch(t, addr, "--since", time.Now().Add(time.Hour).Format(time.RFC3339)); len(evs) != 0 {
		t.Errorf("--since an hour from now: %d events", len(evs))
	}
	if evs := auditSearch(t, addr, "--limit", "1"); len(evs) != 1 {
		t.Errorf("--limit 1: %d events", len(evs))
	}

	// The table.
	out, err := runAuditSearch(addr, "--denied")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "TIME") ||
		!strings.Contains(lines[0], "PRINCIPAL") || !strings.Contains(lines[0], "CLIENT") || !strings.Contains(lines[0], "OPERATION") ||
		!strings.Contains(lines[0], "RESOURCE") || !strings.Contains(lines[0], "RESULT") ||
		!strings.Contains(lines[1], "User:svc-meridian-pos") || !strings.Contains(lines[1], "topic:orders") || !strings.Contains(lines[1], "denied") {
		t.Errorf("table:\n%s", out)
	}

	// The topic: delete policy with the configured retention, never
	// compacted; each record keyed by its principal; no secret stored.
	rc, err := adm.DescribeTopicConfigs(ctx, audit.Topic)
	if err != nil || rc[0].Err != nil {
		t.Fatalf("describe %s: %v %v", audit.Topic, err, rc)
	}
	cfgs := map[string]string{}
	for _, c := range rc[0].Configs {
		cfgs[c.Key] = c.MaybeValue()
	}
	if cfgs["cleanup.policy"] != "delete" || cfgs["retention.ms"] != "86400000" {
		t.Errorf("%s configs: cleanup.policy=%q retention.ms=%q", audit.Topic, cfgs["cleanup.policy"], cfgs["retention.ms"])
	}
	recs := consumeAuditTopic(t, addr, audit.Topic)
	if len(recs) == 0 {
		t.Fatal("no records")
	}
	for _, r := range recs {
		ce, err := audit.Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != ce.Data.AuthenticationInfo.Principal {
			t.Errorf("record keyed %q, principal %q", r.Key, ce.Data.AuthenticationInfo.Principal)
		}
		if bytes.Contains(r.Value, []byte("hunter2")) {
			t.Errorf("a secret reached the audit trail: %s", r.Value)
		}
		var m map[string]any
		if err := json.Unmarshal(r.Value, &m); err != nil || m["specversion"] != "1.0" {
			t.Errorf("not a CloudEvent: %s", r.Value)
		}
	}
	// The writer's counters: records written, none dropped.
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`(?m)^berth_audit_written_events_total [1-9]`).Match(metrics) ||
		!regexp.MustCompile(`(?m)^berth_audit_dropped_events_total 0$`).Match(metrics) {
		t.Errorf("audit metrics:\n%s", regexp.MustCompile(`(?m)^berth_audit.*$`).FindAll(metrics, -1))
	}

	// The broker's own writes to the audit topic are not audited (reads
	// of it, such as this search's, are).
	if evs := auditSearch(t, addr, "--resource", "topic:"+audit.Topic, "--operation", "write"); len(evs) != 0 {
		t.Errorf("%d events of writes to %s itself", len(evs), audit.Topic)
	}
}

// consumeAuditTopic reads a topic from the start to its current end.
func consumeAuditTopic(t *testing.T, addr, topic string) []*kgo.Record {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	ends.Each(func(o kadm.ListedOffset) { total += int(o.Offset) })
	return consumeN(t, addr, topic, total)
}

// The other management events, read from the file sink (audit.log.file):
// partitions added, an admin tool's offset commit, a group deleted, and
// `berth dlq purge`'s DeleteRecords marked io.berth.dlq.purge.
func TestAuditManagementEventsInFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	n := testcluster.Start(t, testcluster.With("audit.log.enable", "true"), testcluster.With("audit.log.file", file),
		testcluster.With("audit.log.events", "management"))
	addr := n.KafkaAddr()
	ctx := ctxT(t, time.Minute)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("jobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	produceSync(t, cl, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")})
	if _, err := adm.CreatePartitions(ctx, 2, "jobs"); err != nil { // 2 more: 3 in all
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.AddOffset("jobs", 0, 1, -1)
	if r, err := adm.CommitOffsets(ctx, "reset-g", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	if r, err := adm.DeleteGroups(ctx, "reset-g", "no-such-group"); err != nil {
		t.Fatalf("delete groups: %v %v", err, r)
	}
	pcl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("berth-dlq-purge"))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	del := kadm.Offsets{}
	del.AddOffset("jobs", 0, 1, -1)
	if _, err := kadm.NewClient(pcl).DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}

	rcl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("berth-dlq-redrive"))
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	roffs := kadm.Offsets{}
	roffs.AddOffset("jobs", 1, 0, -1)
	if r, err := kadm.NewClient(rcl).CommitOffsets(ctx, "berth-redrive.jobs", roffs); err != nil || r.Error() != nil {
		t.Fatalf("redrive commit: %v %v", err, r.Error())
	}

	want := map[string]func(audit.CloudEvent) bool{
		"DLQ redrive": func(ce audit.CloudEvent) bool {
			return ce.Type == "io.berth.dlq.redrive" && ce.Data.AuthorizationInfo.ResourceName == "berth-redrive.jobs"
		},
		"CreatePartitions jobs": func(ce audit.CloudEvent) bool {
			return ce.Data.MethodName == "kafka.CreatePartitions" && ce.Data.AuthorizationInfo.ResourceName == "jobs" && ce.Data.Details["count"] == "3"
		},
		"admin OffsetCommit": func(ce audit.CloudEvent) bool {
			return ce.Data.MethodName == "kafka.OffsetCommit" && ce.Data.AuthorizationInfo.ResourceType == "Group" &&
				ce.Data.AuthorizationInfo.ResourceName == "reset-g" && ce.Data.Details["offsets"] == "jobs/0=1"
		},
		"DeleteGroups reset-g": func(ce audit.CloudEvent) bool {
			return ce.Data.MethodName == "kafka.DeleteGroups" && ce.Data.AuthorizationInfo.ResourceName == "reset-g" && ce.Data.Result.Status == audit.StatusSuccess
		},
		"DeleteGroups no-such-group failed": func(ce audit.CloudEvent) bool {
			return ce.Data.MethodName == "kafka.DeleteGroups" && ce.Data.AuthorizationInfo.ResourceName == "no-such-group" &&
				ce.Data.Result.Status == audit.StatusFailure && ce.Data.Result.Message == "GROUP_ID_NOT_FOUND"
		},
		"DLQ purge": func(ce audit.CloudEvent) bool {
			return ce.Type == "io.berth.dlq.purge" && ce.Data.MethodName == "kafka.DeleteRecords" && ce.Data.Details["before_offsets"] == "0:1"
		},
	}
	poll.Until(t, 20*time.Second, func() error {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		var missing []string
		for name, ok := range want {
			found := false
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				ce, err := audit.Decode([]byte(l))
				if err != nil {
					return fmt.Errorf("line %q: %v", l, err)
				}
				if ce.Data.Kind != "management" {
					t.Fatalf("a %s event though audit.log.events=management", ce.Data.Kind)
				}
				if ce.Data.AuthorizationInfo != nil && ok(ce) {
					found = true
				}
			}
			if !found {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("no event for %v in the audit file:\n%s", missing, b)
		}
		return nil
	})
}

// On a cluster every node's events reach __berth_audit: with one
// partition, whose leader is one node, the other two append through the
// broker-to-broker client (ReplicaSink's Produce to the leader).
func TestAuditCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three berth processes")
	}
	c := testcluster.StartCluster(t, 3, "--audit.log.enable", "true", "--audit.log.topic.num.partitions", "1")
	ctx := ctxT(t, 2*time.Minute)
	for _, id := range c.IDs() {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{fmt.Sprintf("audit-probe-%d", id)}
		if _, err := testcluster.DirectRequest(ctx, c.Direct(t, id), req); err != nil {
			t.Fatalf("DeleteGroups to node %d: %v", id, err)
		}
	}
	addrs := strings.Join(c.Addrs(), ",")
	poll.Until(t, time.Minute, func() error {
		out, err := runAuditSearch(addrs, "--operation", "DeleteGroups", "--resource", "group:audit-probe-*", "--json")
		if err != nil {
			return err
		}
		sources := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if ce, err := audit.Decode([]byte(l)); err == nil {
				sources[ce.Source] = true
			}
		}
		if len(sources) != 3 {
			return fmt.Errorf("events from %d nodes, want 3: %v", len(sources), sources)
		}
		return nil
	})
}
