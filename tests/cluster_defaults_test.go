package tests

// The durable defaults: a topic nobody gave a replication factor gets
// min(3, nodes) replicas and, from three replicas up, min.insync.replicas
// 2, unless someone set otherwise; internal topics too. A topic created
// while the cluster's brokers are not all up waits for them instead of
// getting fewer replicas for good.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// durabilityOf is a topic's replication factor as Metadata reports it
// (that of its partitions) and its effective min.insync.replicas with
// the source DescribeConfigs gives.
func durabilityOf(ctx context.Context, adm *kadm.Client, topic string) (int, string, kmsg.ConfigSource, error) {
	td, err := adm.ListTopicsWithInternal(ctx, topic)
	if err == nil {
		err = td[topic].Err
	}
	if err != nil {
		return 0, "", 0, fmt.Errorf("Metadata %s: %w", topic, err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, "", 0, fmt.Errorf("DescribeConfigs %s: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return 0, "", 0, fmt.Errorf("DescribeConfigs %s: %w", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == "min.insync.replicas" {
			return td[topic].Partitions.NumReplicas(), c.MaybeValue(), c.Source, nil
		}
	}
	return 0, "", 0, fmt.Errorf("DescribeConfigs %s: no min.insync.replicas", topic)
}

// wantDurability waits until a topic's replication factor and effective
// min.insync.replicas (with its source) are as given, on the node that
// answers (a node's metadata may lag the log for a moment).
func wantDurability(t *testing.T, adm *kadm.Client, topic string, rf int, minISR string, src kmsg.ConfigSource) {
	t.Helper()
	poll.Until(t, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gotRF, gotMin, gotSrc, err := durabilityOf(ctx, adm, topic)
		if err == nil && (gotRF != rf || gotMin != minISR || gotSrc != src) {
			err = fmt.Errorf("%s: replication factor %d, min.insync.replicas %s (%v); want %d, %s (%v)",
				topic, gotRF, gotMin, gotSrc, rf, minISR, src)
		}
		return err
	})
}

// autoCreateCode asks cl's seed broker for topic's metadata with auto-creation
// allowed, once, and returns the topic's error code.
func autoCreateCode(t *testing.T, cl *kgo.Client, topic string) int16 {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := tc.DirectRequest(ctxT(t, 10*time.Second), cl, req)
	must(t, "Metadata", err)
	mr := resp.(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 {
		t.Fatalf("Metadata answered %d topics", len(mr.Topics))
	}
	return mr.Topics[0].ErrorCode
}

// findCoordinatorCode asks cl's seed broker for group's coordinator, once.
func findCoordinatorCode(t *testing.T, cl *kgo.Client, group string) int16 {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = group, []string{group} // v0-3, v4+
	resp, err := tc.DirectRequest(ctxT(t, 10*time.Second), cl, req)
	must(t, "FindCoordinator", err)
	fr := resp.(*kmsg.FindCoordinatorResponse)
	if len(fr.Coordinators) == 1 {
		return fr.Coordinators[0].ErrorCode
	}
	return fr.ErrorCode
}

// produceRange produces records r<from> ... r<to-1> to topic, acknowledged
// as cl asks, failing the test on any error.
func produceRange(t *testing.T, cl *kgo.Client, topic string, from, to int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%05d", i)})
	}
	ctx := ctxT(t, 60*time.Second)
	for len(recs) > 0 {
		n := min(len(recs), 500)
		if err := cl.ProduceSync(ctx, recs[:n]...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		recs = recs[n:]
	}
}

// On three nodes an auto-created topic (no replication factor given)
// gets three replicas and min.insync.replicas 2, so acks=all survives
// SIGKILL of its leader with nothing acknowledged lost. With a node down
// another such topic waits (it would otherwise get two replicas for
// good); an explicit replication factor of 1 is still allowed; and the
// user's dynamic default.replication.factor and min.insync.replicas win.
func TestAutoCreatedTopicIsDurableOnThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of berth processes")
	}
	c := tc.StartCluster(t, 3)
	seeds := c.Addrs()
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100 * time.Millisecond)}
	adm := kadm.NewClient(tc.Client(t, seeds[0], opts...))
	producer := tc.Client(t, seeds[0], append(opts, kgo.AllowAutoTopicCreation(), kgo.RequiredAcks(kgo.AllISRAcks()))...)

	const topic = "durable"
	produceRange(t, producer, topic, 0, 3000)
	wantDurability(t, adm, topic, 3, "2", kmsg.ConfigSourceDefaultConfig)
	rcs, err := adm.DescribeBrokerConfigs(ctxT(t, 10*time.Second))
	must(t, "DescribeConfigs broker", err)
	for _, cfg := range rcs[0].Configs {
		if cfg.Key == "default.replication.factor" && (cfg.MaybeValue() != "3" || cfg.Source != kmsg.ConfigSourceDefaultConfig) {
			t.Errorf("default.replication.factor %s (%v), want 3 (DEFAULT_CONFIG)", cfg.MaybeValue(), cfg.Source)
		}
	}

	// berth topic create without -r says what the broker chose, and
	// describe shows it.
	bootstrap := strings.Join(seeds, ",")
	out, stderr, err := berthCLI(ctxT(t, time.Minute), "", "topic", "create", "by-cli", "-b", bootstrap)
	if want := "Created topic by-cli (1 partition, replication factor 3, min.insync.replicas 2).\n"; err != nil || out != want {
		t.Errorf("berth topic create: %q, %v (%s); want %q", out, err, stderr, want)
	}
	out, stderr, err = berthCLI(ctxT(t, time.Minute), "", "topic", "describe", "by-cli", "-b", bootstrap)
	if want := "Replication factor: 3  Min in-sync replicas: 2\n"; err != nil || !strings.Contains(out, want) {
		t.Errorf("berth topic describe: %q, %v (%s); want it to show %q", out, err, stderr, want)
	}

	td, err := adm.ListTopics(ctxT(t, 10*time.Second), topic)
	must(t, "Metadata", err)
	leader := td[topic].Partitions[0].Leader
	c.Kill(leader)
	t.Logf("killed node %d, the leader of %s/0", leader, topic)
	produceRange(t, producer, topic, 3000, 5000)

	var survivors []string
	var survivor int32
	for _, nd := range c.Nodes {
		if nd.ID != leader {
			survivors, survivor = append(survivors, nd.KafkaAddr), nd.ID
		}
	}
	got := map[string]int{}
	for _, r := range consumeN(t, survivors[0], topic, 5000, kgo.SeedBrokers(survivors...)) {
		got[string(r.Value)]++
	}
	for i := range 5000 {
		if v := fmt.Sprintf("r%05d", i); got[v] != 1 {
			t.Fatalf("acknowledged record %s read %d times, want once", v, got[v])
		}
	}

	// Two of the three nodes are up: a topic with the default (3) waits
	// rather than get two replicas; an explicit replication factor of 1
	// is created at once, with min.insync.replicas 1.
	direct := c.Direct(t, survivor, kgo.RequestRetries(0))
	if code := autoCreateCode(t, direct, "waits"); code != kerr.LeaderNotAvailable.Code {
		t.Errorf("auto-creating a topic with a node down: %v, want LEADER_NOT_AVAILABLE (retriable)", kerr.ErrorForCode(code))
	}
	resp, err := adm.CreateTopic(ctxT(t, 30*time.Second), 1, 1, nil, "single")
	if err == nil {
		err = resp.Err
	}
	must(t, "CreateTopic RF 1", err)
	wantDurability(t, adm, "single", 1, "1", kmsg.ConfigSourceDefaultConfig)

	// The user's settings win, also over topics created before.
	_, err = adm.AlterBrokerConfigs(ctxT(t, 10*time.Second), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "default.replication.factor", Value: kmsg.StringPtr("2")},
		{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kmsg.StringPtr("1")},
	})
	must(t, "AlterConfigs", err)
	produceRange(t, producer, "set-by-user", 0, 10)
	wantDurability(t, adm, "set-by-user", 2, "1", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	wantDurability(t, adm, topic, 3, "1", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
}

// A cluster's brokers register one by one: a topic auto-created, or a
// group coordinator asked for, while only two of three voters are up
// waits (a retriable error) and gets three replicas once the third is up,
// instead of getting fewer replicas for good.
func TestEarlyTopicsWaitForTheClusterNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of berth processes")
	}
	c := tc.NewCluster(t, 3)
	c.Start(1, 2)
	seeds := c.Addrs()
	direct := c.Direct(t, 1, kgo.RequestRetries(0))
	if code := autoCreateCode(t, direct, "early"); code != kerr.LeaderNotAvailable.Code {
		t.Errorf("auto-creating a topic with 2 of 3 nodes up: %v, want LEADER_NOT_AVAILABLE (retriable)", kerr.ErrorForCode(code))
	}
	if code := findCoordinatorCode(t, direct, "g"); code != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("FindCoordinator with 2 of 3 nodes up: %v, want COORDINATOR_NOT_AVAILABLE (retriable)", kerr.ErrorForCode(code))
	}
	adm := kadm.NewClient(tc.Client(t, seeds[0], kgo.SeedBrokers(seeds...)))
	td, err := adm.ListTopicsWithInternal(ctxT(t, 10*time.Second))
	must(t, "Metadata", err)
	if names := td.Names(); len(names) != 0 {
		t.Fatalf("topics %v were created while the cluster's brokers were not all up", names)
	}

	// A producer that starts now waits for the third node, then succeeds.
	producer := tc.Client(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.AllowAutoTopicCreation(),
		kgo.MetadataMinAge(100*time.Millisecond))
	produced := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		produced <- producer.ProduceSync(ctx, &kgo.Record{Topic: "early", Value: []byte("first")}).FirstErr()
	}()
	c.Start(3)
	must(t, "produce", <-produced)
	wantDurability(t, adm, "early", 3, "2", kmsg.ConfigSourceDefaultConfig)

	consumer := tc.Client(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("early"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	pollCommit(t, consumer, 1)
	wantDurability(t, adm, "__consumer_offsets", 3, "2", kmsg.ConfigSourceDefaultConfig)
}

// pollCommit consumes n records in the consumer's group and commits them.
func pollCommit(t *testing.T, consumer *kgo.Client, n int) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	for got := 0; got < n; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before timeout", got, n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got += fs.NumRecords()
	}
	must(t, "commit", consumer.CommitUncommittedOffsets(ctx))
}

// One node keeps what it always had: replication factor 1 and
// min.insync.replicas 1, for auto-created and internal topics.
func TestSingleNodeKeepsReplicationFactorOne(t *testing.T) {
	n := tc.Start(t)
	adm := tc.Admin(t, n.Addr())
	producer := tc.Client(t, n.Addr(), kgo.AllowAutoTopicCreation())
	produceRange(t, producer, "solo", 0, 10)
	wantDurability(t, adm, "solo", 1, "1", kmsg.ConfigSourceDefaultConfig)
	consumer := tc.Client(t, n.Addr(), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("solo"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	pollCommit(t, consumer, 10)
	wantDurability(t, adm, "__consumer_offsets", 1, "1", kmsg.ConfigSourceDefaultConfig)
}
