package tests

// Dead-letter topics of share groups (KIP-1191 names, Berth's writer):
// a rejected record and a record past the delivery limit land in the
// group's DLQ topic with the source key, value and headers and every
// context header; a missing or unflagged DLQ topic holds the records back
// (retried) until it is fixed; auto-creation; copy.record.enable=false.

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// headerMap returns a record's headers by key; a repeated key fails the
// test.
func headerMap(t *testing.T, r *kgo.Record) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, h := range r.Headers {
		if _, dup := m[h.Key]; dup {
			t.Errorf("header %s twice", h.Key)
		}
		m[h.Key] = string(h.Value)
	}
	return m
}

// dlqTopicConfigs is the topic config a DLQ topic needs.
func dlqTopicConfigs() map[string]*string {
	enable := "true"
	return map[string]*string{"errors.deadletterqueue.group.enable": &enable}
}

// receiveJob polls cl until it returns the record with value v.
func receiveJob(t *testing.T, cl *kgo.Client, v string) *kgo.Record {
	t.Helper()
	var got *kgo.Record
	poll.Until(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, cl, 500*time.Millisecond) {
			if string(r.Value) == v {
				got = r
			} else {
				r.Ack(kgo.AckAccept)
			}
		}
		if got == nil {
			return fmt.Errorf("job %s not delivered", v)
		}
		return nil
	})
	return got
}

// receiveOnly polls cl until the record with value v is delivered and
// fails the test if any other record is delivered first or with it (one
// that was parked must not come back).
func receiveOnly(t *testing.T, cl *kgo.Client, v string) *kgo.Record {
	t.Helper()
	var got *kgo.Record
	poll.Until(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, cl, 500*time.Millisecond) {
			if string(r.Value) != v {
				t.Fatalf("record %q (offset %d, delivery %d) delivered while waiting for %q", r.Value, r.Offset, r.DeliveryCount(), v)
			}
			got = r
		}
		if got == nil {
			return fmt.Errorf("job %s not delivered", v)
		}
		return nil
	})
	return got
}

// checkContext checks the context headers of a DLQ record.
func checkContext(t *testing.T, h map[string]string, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got, ok := h[k]; !ok || got != v {
			t.Errorf("DLQ header %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
}

func TestShareDLQRejectedRecord(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "orders", 1, nil)
	tc.CreateTopic(t, n.Addr(), "dlq.orders", 1, dlqTopicConfigs())
	prod := tc.Client(t, n.Addr())
	setGroupConfigs(t, prod, "packers",
		"errors.deadletterqueue.topic.name", "dlq.orders",
		"share.auto.offset.reset", "earliest")

	ts := time.UnixMilli(time.Now().Add(-time.Minute).UnixMilli())
	src := &kgo.Record{Topic: "orders", Key: []byte("order-7"), Value: []byte(`{"sku":"x"}`), Timestamp: ts,
		Headers: []kgo.RecordHeader{
			{Key: "trace-id", Value: []byte("abc")},
			{Key: "__dlq.errors.topic", Value: []byte("stale, from an earlier parking")},
			{Key: "__dlq.errors.berth.redrive.count", Value: []byte("1")},
		}}
	produceSync(t, prod, src)
	cl := shareConsumer(t, n.Addr(), "packers", "orders")
	job := receiveJob(t, cl, `{"sku":"x"}`)
	job.Ack(kgo.AckReject)
	if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	recs := consumeN(t, n.Addr(), "dlq.orders", 1)
	d := recs[0]
	if string(d.Key) != "order-7" || string(d.Value) != `{"sku":"x"}` {
		t.Errorf("DLQ record key %q value %q", d.Key, d.Value)
	}
	if d.Timestamp.Before(ts.Add(time.Minute / 2)) {
		t.Errorf("DLQ record timestamp %v, want the time it was parked, not the source's %v", d.Timestamp, ts)
	}
	h := headerMap(t, d)
	checkContext(t, h, map[string]string{
		"trace-id":                         "abc",
		"__dlq.errors.berth.redrive.count": "1",
		"__dlq.errors.topic":               "orders",
		"__dlq.errors.partition":           "0",
		"__dlq.errors.offset":              strconv.FormatInt(job.Offset, 10),
		"__dlq.errors.group":               "packers",
		"__dlq.errors.delivery.count":      "1",
		"__dlq.errors.message":             "Offset rejected by client.",
		"__dlq.errors.berth.reason":        "rejected",
		"__dlq.errors.berth.timestamp":     strconv.FormatInt(ts.UnixMilli(), 10),
	})
	// The source headers come first, then the context headers.
	if d.Headers[0].Key != "trace-id" {
		t.Errorf("first DLQ header %s, want the source's trace-id", d.Headers[0].Key)
	}

	// Parked means archived: the job is not delivered again.
	produceSync(t, prod, &kgo.Record{Topic: "orders", Value: []byte("marker")})
	receiveOnly(t, cl, "marker").Ack(kgo.AckAccept)
}

func TestShareDLQDeliveryLimitReached(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "emails", 1, nil)
	tc.CreateTopic(t, n.Addr(), "dlq.emails", 1, dlqTopicConfigs())
	prod := tc.Client(t, n.Addr())
	setGroupConfigs(t, prod, "senders",
		"errors.deadletterqueue.topic.name", "dlq.emails",
		"share.delivery.count.limit", "5",
		"share.retry.backoff.initial.ms", "50",
		"share.retry.backoff.max.ms", "50",
		"share.auto.offset.reset", "earliest")
	produceSync(t, prod, &kgo.Record{Topic: "emails", Key: []byte("mail-1"), Value: []byte("hello")})
	cl := shareConsumer(t, n.Addr(), "senders", "emails")

	var last *kgo.Record
	for i := 1; i <= 5; i++ {
		job := receiveJob(t, cl, "hello")
		if job.DeliveryCount() != int32(i) {
			t.Fatalf("delivery %d has delivery count %d", i, job.DeliveryCount())
		}
		job.Ack(kgo.AckRelease)
		if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		last = job
	}

	d := consumeN(t, n.Addr(), "dlq.emails", 1)[0]
	if string(d.Key) != "mail-1" || string(d.Value) != "hello" {
		t.Errorf("DLQ record key %q value %q", d.Key, d.Value)
	}
	checkContext(t, headerMap(t, d), map[string]string{
		"__dlq.errors.topic":          "emails",
		"__dlq.errors.partition":      "0",
		"__dlq.errors.offset":         strconv.FormatInt(last.Offset, 10),
		"__dlq.errors.group":          "senders",
		"__dlq.errors.delivery.count": "5",
		"__dlq.errors.berth.reason":   "delivery limit reached",
		"__dlq.errors.message":        "Offset delivery count exceeded the threshold.",
	})
	produceSync(t, prod, &kgo.Record{Topic: "emails", Value: []byte("marker")})
	receiveOnly(t, cl, "marker").Ack(kgo.AckAccept)
}

// A job produced 13 days ago and parked now is stamped with the time it
// was parked: the DLQ topic's 7-day retention keeps it, while it deletes
// a record that really is 13 days old. The job's own timestamp is in
// __dlq.errors.berth.timestamp, and `berth dlq list` and `inspect` show
// both ages.
func TestShareDLQRecordStampedWhenParked(t *testing.T) {
	n := tc.Start(t, tc.With("log.retention.check.interval.ms", "50"))
	tc.CreateTopic(t, n.Addr(), "renewals", 1, nil)
	// segment.ms=1: every write after the first rolls a segment, so each
	// record has its own and retention judges each by its timestamp.
	// Retention is off until every record is in place.
	dlqConfigs := dlqTopicConfigs()
	dlqConfigs["segment.ms"] = kadm.StringPtr("1")
	dlqConfigs["retention.ms"] = kadm.StringPtr("-1")
	tc.CreateTopic(t, n.Addr(), "dlq.renewals", 1, dlqConfigs)
	prod := tc.Client(t, n.Addr())
	adm := tc.Admin(t, n.Addr())
	setGroupConfigs(t, prod, "renewers",
		"errors.deadletterqueue.topic.name", "dlq.renewals",
		"share.delivery.count.limit", "2",
		"share.retry.backoff.initial.ms", "50",
		"share.retry.backoff.max.ms", "50",
		"share.auto.offset.reset", "earliest")

	const day = 24 * time.Hour
	produced := time.UnixMilli(time.Now().Add(-13 * day).UnixMilli())
	// A record that really is 13 days old, first in the DLQ topic:
	// retention must delete it.
	produceSync(t, prod, &kgo.Record{Topic: "dlq.renewals", Value: []byte("really old"), Timestamp: produced})
	produceSync(t, prod, &kgo.Record{Topic: "renewals", Key: []byte("sub-9"), Value: []byte("renew"), Timestamp: produced})
	cl := shareConsumer(t, n.Addr(), "renewers", "renewals")
	before := time.Now()
	for range 2 { // the delivery limit: released twice, then parked
		receiveJob(t, cl, "renew").Ack(kgo.AckRelease)
		if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	var d *kgo.Record
	poll.Until(t, 30*time.Second, func() error {
		recs := consumeN(t, n.Addr(), "dlq.renewals", 2)
		d = recs[len(recs)-1]
		if string(d.Value) != "renew" {
			return fmt.Errorf("DLQ record %q, want the parked job", d.Value)
		}
		return nil
	})
	after := time.Now()
	if d.Timestamp.Before(before.Truncate(time.Millisecond)) || d.Timestamp.After(after) {
		t.Errorf("DLQ record timestamp %v, want the time it was parked (between %v and %v)", d.Timestamp, before, after)
	}
	checkContext(t, headerMap(t, d), map[string]string{
		"__dlq.errors.berth.timestamp": strconv.FormatInt(produced.UnixMilli(), 10),
		"__dlq.errors.delivery.count":  "2",
		"__dlq.errors.berth.reason":    "delivery limit reached",
	})

	// A later record closes the parked job's segment; then a 7-day
	// retention (shorter than the job's age, longer than since parking)
	// deletes the really old record and keeps the parked job.
	produceSync(t, prod, &kgo.Record{Topic: "dlq.renewals", Value: []byte("later")})
	week := strconv.FormatInt((7 * day).Milliseconds(), 10)
	rs, err := adm.AlterTopicConfigs(ctxT(t, 10*time.Second),
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &week}}, "dlq.renewals")
	if err == nil {
		_, err = rs.On("dlq.renewals", nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	var start int64
	poll.Until(t, 30*time.Second, func() error {
		starts, err := adm.ListStartOffsets(ctxT(t, 10*time.Second), "dlq.renewals")
		if err != nil {
			return err
		}
		o, _ := starts.Lookup("dlq.renewals", 0)
		if start = o.Offset; start < 1 {
			return fmt.Errorf("log start offset %d: retention has not run yet", start)
		}
		return nil
	})
	if start != 1 {
		t.Fatalf("log start offset %d after retention: the parked job (offset 1) was deleted as if it were 13 days old", start)
	}

	var list []struct {
		Topic          string `json:"topic"`
		OldestAgeMs    int64  `json:"oldest_age_ms"`
		OldestJobAgeMs int64  `json:"oldest_job_age_ms"`
	}
	berthJSON(t, &list, "dlq", "list", "-b", n.Addr())
	if len(list) != 1 || list[0].OldestAgeMs > time.Minute.Milliseconds() ||
		list[0].OldestJobAgeMs < (13*day).Milliseconds() || list[0].OldestJobAgeMs > (14*day).Milliseconds() {
		t.Errorf("dlq list: %+v, want the oldest parked under a minute ago, its job 13 days old", list)
	}
	var jobs []dlqJobJSON
	berthJSON(t, &jobs, "dlq", "inspect", "dlq.renewals", "--since", "1h", "-b", n.Addr())
	if len(jobs) != 2 || jobs[0].SourceTimestamp != produced.UnixMilli() || jobs[0].AgeMs > time.Minute.Milliseconds() ||
		jobs[0].SourceAgeMs < (13*day).Milliseconds() {
		t.Errorf("dlq inspect --since 1h: %+v, want the parked job (parked now, 13 days old) and the later record", jobs)
	}
}

// A DLQ topic that is missing, then lacks errors.deadletterqueue.group.enable,
// holds the rejected record back (retried, never archived without it);
// once the topic is fixed the record lands.
func TestShareDLQTopicMustExistAndBeEnabled(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "invoices", 1, nil)
	prod := tc.Client(t, n.Addr())
	adm := tc.Admin(t, n.Addr())
	setGroupConfigs(t, prod, "billing",
		"errors.deadletterqueue.topic.name", "dlq.invoices",
		"share.auto.offset.reset", "earliest")
	produceSync(t, prod, &kgo.Record{Topic: "invoices", Key: []byte("inv-1"), Value: []byte("bad")})
	cl := shareConsumer(t, n.Addr(), "billing", "invoices")
	job := receiveJob(t, cl, "bad")
	job.Ack(kgo.AckReject)
	if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	// Not auto-created (errors.deadletterqueue.auto.create.topics.enable is
	// false by default).
	time.Sleep(500 * time.Millisecond) // a negative check: give a wrong write the time to happen
	topics, err := adm.ListTopics(ctxT(t, 10*time.Second), "dlq.invoices")
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("dlq.invoices") {
		t.Fatal("the DLQ topic was created although auto-creation is off")
	}

	// Created without the flag: still refused.
	tc.CreateTopic(t, n.Addr(), "dlq.invoices", 1, nil)
	time.Sleep(500 * time.Millisecond) // a negative check
	offs, err := adm.ListEndOffsets(ctxT(t, 10*time.Second), "dlq.invoices")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("dlq.invoices", 0); o.Offset != 0 {
		t.Fatalf("%d records written to a DLQ topic without errors.deadletterqueue.group.enable", o.Offset)
	}

	// Flagged: the held-back record lands.
	enable := "true"
	rs, err := adm.AlterTopicConfigs(ctxT(t, 10*time.Second),
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "errors.deadletterqueue.group.enable", Value: &enable}}, "dlq.invoices")
	if err == nil {
		_, err = rs.On("dlq.invoices", nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	d := consumeN(t, n.Addr(), "dlq.invoices", 1)[0]
	if string(d.Key) != "inv-1" || headerMap(t, d)["__dlq.errors.berth.reason"] != "rejected" {
		t.Errorf("DLQ record %q with headers %v", d.Key, headerMap(t, d))
	}
}

// With auto-creation on, a missing DLQ topic is created (flagged) on the
// first write; copy.record.enable=false writes the context headers only.
func TestShareDLQAutoCreateWithoutCopy(t *testing.T) {
	n := tc.Start(t, tc.With("errors.deadletterqueue.auto.create.topics.enable", "true"))
	tc.CreateTopic(t, n.Addr(), "uploads", 1, nil)
	prod := tc.Client(t, n.Addr())
	adm := tc.Admin(t, n.Addr())
	setGroupConfigs(t, prod, "scanners",
		"errors.deadletterqueue.topic.name", "dlq.uploads",
		"errors.deadletterqueue.copy.record.enable", "false",
		"share.auto.offset.reset", "earliest")
	produceSync(t, prod, &kgo.Record{Topic: "uploads", Key: []byte("file-1"), Value: []byte("virus"),
		Headers: []kgo.RecordHeader{{Key: "owner", Value: []byte("ann")}}})
	cl := shareConsumer(t, n.Addr(), "scanners", "uploads")
	job := receiveJob(t, cl, "virus")
	job.Ack(kgo.AckReject)
	if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	poll.Until(t, 30*time.Second, func() error {
		topics, err := adm.ListTopics(ctxT(t, 10*time.Second), "dlq.uploads")
		if err != nil {
			return err
		}
		if !topics.Has("dlq.uploads") {
			return errors.New("DLQ topic not created yet")
		}
		return nil
	})
	rc, err := adm.DescribeTopicConfigs(ctxT(t, 10*time.Second), "dlq.uploads")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rc.On("dlq.uploads", nil)
	if err != nil {
		t.Fatal(err)
	}
	flagged := false
	for _, c := range cfg.Configs {
		flagged = flagged || c.Key == "errors.deadletterqueue.group.enable" && c.MaybeValue() == "true"
	}
	if !flagged {
		t.Error("the created DLQ topic lacks errors.deadletterqueue.group.enable=true")
	}
	d := consumeN(t, n.Addr(), "dlq.uploads", 1)[0]
	if d.Key != nil || d.Value != nil {
		t.Errorf("copy.record.enable=false: DLQ record has key %q value %q", d.Key, d.Value)
	}
	h := headerMap(t, d)
	if _, ok := h["owner"]; ok {
		t.Error("copy.record.enable=false: the source header was copied")
	}
	checkContext(t, h, map[string]string{
		"__dlq.errors.topic":          "uploads",
		"__dlq.errors.offset":         strconv.FormatInt(job.Offset, 10),
		"__dlq.errors.group":          "scanners",
		"__dlq.errors.delivery.count": "1",
		"__dlq.errors.berth.reason":   "rejected",
	})
}

// On three brokers the DLQ topic's leader is another broker than the
// source partition's: the source leader writes through its internal
// client to that broker, acks=all over three replicas.
func TestShareDLQThreeNodesOtherLeader(t *testing.T) {
	c := tc.StartCluster(t, 3)
	seeds := c.Addrs()
	adm := tc.Admin(t, seeds[0])
	ctx := ctxT(t, 120*time.Second)
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	var leader int32 = -1
	poll.Until(t, 30*time.Second, func() error {
		ps, err := adm.ListTopics(ctx, "jobs")
		if err != nil {
			return err
		}
		// A broker that has not applied the new topic yet answers
		// without partition 0: its zero value has leader 0, not a node.
		if leader = ps["jobs"].Partitions[0].Leader; leader <= 0 {
			return fmt.Errorf("no leader: %+v", ps["jobs"])
		}
		return nil
	})
	// The DLQ topic's preferred leader is the next broker.
	other := leader%3 + 1
	third := other%3 + 1
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "dlq.jobs", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{other, third, leader}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "errors.deadletterqueue.group.enable", kmsg.StringPtr("true")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	cl0 := tc.Client(t, seeds[0], kgo.SeedBrokers(seeds...))
	resp, err := req.RequestWith(ctx, cl0)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		msg := ""
		if resp != nil && resp.Topics[0].ErrorMessage != nil {
			msg = *resp.Topics[0].ErrorMessage
		}
		t.Fatalf("creating dlq.jobs: %v: %s", err, msg)
	}

	prod := tc.Client(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(50*time.Millisecond))
	setGroupConfigs(t, prod, "workers",
		"errors.deadletterqueue.topic.name", "dlq.jobs",
		"share.auto.offset.reset", "earliest")
	produceSync(t, prod, &kgo.Record{Topic: "jobs", Key: []byte("j1"), Value: []byte("broken")})
	cl := shareConsumer(t, seeds[0], "workers", "jobs", kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(50*time.Millisecond))
	job := receiveJob(t, cl, "broken")
	job.Ack(kgo.AckReject)
	if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	d := consumeN(t, seeds[0], "dlq.jobs", 1, kgo.SeedBrokers(seeds...))[0]
	if string(d.Key) != "j1" || string(d.Value) != "broken" {
		t.Errorf("DLQ record key %q value %q", d.Key, d.Value)
	}
	checkContext(t, headerMap(t, d), map[string]string{
		"__dlq.errors.topic":        "jobs",
		"__dlq.errors.offset":       strconv.FormatInt(job.Offset, 10),
		"__dlq.errors.group":        "workers",
		"__dlq.errors.berth.reason": "rejected",
	})
	if d.LeaderEpoch < 0 {
		t.Errorf("DLQ record leader epoch %d", d.LeaderEpoch)
	}
}
