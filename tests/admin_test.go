package tests

import (
	"errors"
	"fmt"
	"io"
	"net/http"
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

func strp(s string) *string { return &s }

// Topics can be created (also validate-only), described, grown and deleted,
// and bad requests get Kafka's error codes.
func TestTopicLifecycle(t *testing.T) {
	n := tc.Start(t)
	adm := tc.Admin(t, n.Addr())
	ctx := ctxT(t, 30*time.Second)

	if _, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, "dry"); err != nil {
		t.Fatal(err)
	}
	if td, _ := adm.ListTopics(ctx, "dry"); td["dry"].Err == nil {
		t.Fatal("validate-only created the topic")
	}
	r, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": strp("3600000")}, "life")
	if err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	if r.ID == (kadm.TopicID{}) {
		t.Fatal("no topic id returned")
	}
	if r, _ := adm.CreateTopic(ctx, 1, 1, nil, "life"); !errors.Is(r.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("duplicate create: %v", r.Err)
	}
	if r, _ := adm.CreateTopic(ctx, 1, 1, nil, "bad/name"); !errors.Is(r.Err, kerr.InvalidTopicException) {
		t.Fatalf("bad name: %v", r.Err)
	}
	if r, _ := adm.CreateTopic(ctx, 1, 3, nil, "rf3"); !errors.Is(r.Err, kerr.InvalidReplicationFactor) {
		t.Fatalf("rf 3 on one broker: %v", r.Err)
	}
	if r, _ := adm.CreateTopic(ctx, 1, 1, map[string]*string{"no.such.config": strp("1")}, "badcfg"); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("unknown config: %v", r.Err)
	}
	if r, _ := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": strp("soon")}, "badcfg"); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("bad value: %v", r.Err)
	}

	td, err := adm.ListTopics(ctx, "life")
	if err != nil || len(td["life"].Partitions) != 2 {
		t.Fatalf("describe: %v %+v", err, td)
	}
	if _, err := adm.CreatePartitions(ctx, 2, "life"); err != nil {
		t.Fatal(err)
	}
	td, _ = adm.ListTopics(ctx, "life")
	if len(td["life"].Partitions) != 4 {
		t.Fatalf("after CreatePartitions: %d partitions", len(td["life"].Partitions))
	}
	if rs, _ := adm.UpdatePartitions(ctx, 1, "life"); rs["life"].Err == nil {
		t.Fatal("shrinking partitions succeeded")
	}
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("life"))
	produceSync(t, cl, &kgo.Record{Partition: 3, Value: []byte("x")})

	if _, err := adm.DeleteTopics(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		td, err := adm.ListTopics(ctx, "life")
		if err != nil {
			return err
		}
		if !errors.Is(td["life"].Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("topic still listed: %v", td["life"].Err)
		}
		return nil
	})
	// Recreated under the same name, it starts empty.
	tc.CreateTopic(t, n.Addr(), "life", 1, nil)
	ends, err := adm.ListEndOffsets(ctx, "life")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("life", 0); o.Offset != 0 {
		t.Fatalf("recreated topic has end offset %d", o.Offset)
	}
	if r, err := adm.DeleteTopics(ctx, "never-was"); err == nil && !errors.Is(r["never-was"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete missing: %v", r["never-was"].Err)
	}
}

// Topic and broker configs can be described and changed, with sources.
func TestConfigs(t *testing.T) {
	n := tc.Start(t)
	adm := tc.Admin(t, n.Addr())
	ctx := ctxT(t, 30*time.Second)
	tc.CreateTopic(t, n.Addr(), "cfg", 1, map[string]*string{"cleanup.policy": strp("compact")})

	rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("cfg", nil)
	vals := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		vals[c.Key] = c
	}
	if v := vals["cleanup.policy"]; v.MaybeValue() != "compact" || v.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("cleanup.policy = %q from %v", v.MaybeValue(), v.Source)
	}
	if v := vals["retention.ms"]; v.MaybeValue() != "604800000" {
		t.Fatalf("retention.ms default = %q", v.MaybeValue())
	}

	_, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("1000")},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: strp("delete")},
	}, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	rcs, _ = adm.DescribeTopicConfigs(ctx, "cfg")
	rc, _ = rcs.On("cfg", nil)
	for _, c := range rc.Configs {
		switch c.Key {
		case "retention.ms":
			if c.MaybeValue() != "1000" {
				t.Fatalf("retention.ms after alter = %q", c.MaybeValue())
			}
		case "cleanup.policy":
			if c.MaybeValue() != "compact,delete" {
				t.Fatalf("cleanup.policy after append = %q", c.MaybeValue())
			}
		}
	}
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("x")}}, "cfg")
	if err != nil || !errors.Is(resps[0].Err, kerr.InvalidConfig) {
		t.Fatalf("bad value: %v %v", err, resps)
	}

	// Broker configs: static ones are read-only, dynamic ones change.
	resps, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "num.partitions", Value: strp("3")}})
	if err != nil || resps[0].Err != nil {
		t.Fatalf("alter num.partitions: %v %v", err, resps)
	}
	resps, _ = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.dirs", Value: strp("/tmp")}})
	if len(resps) == 0 || resps[0].Err == nil {
		t.Fatal("changing log.dirs at run time succeeded")
	}
	// The new default applies to auto-created topics.
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("auto3"), kgo.AllowAutoTopicCreation())
	produceSync(t, cl, &kgo.Record{Value: []byte("x")})
	td, _ := adm.ListTopics(ctx, "auto3")
	if len(td["auto3"].Partitions) != 3 {
		t.Fatalf("auto-created topic has %d partitions, want 3", len(td["auto3"].Partitions))
	}
	bcs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rc := range bcs {
		for _, c := range rc.Configs {
			if c.Key == "num.partitions" && c.MaybeValue() == "3" {
				found = true
			}
		}
	}
	if !found {
		t.Fatal("DescribeConfigs on the broker does not show num.partitions=3")
	}
	if rcs, _ := adm.DescribeTopicConfigs(ctx, "nope"); len(rcs) > 0 && !errors.Is(rcs[0].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("describe missing topic: %v", rcs[0].Err)
	}
}

// DeleteRecords moves the log start; ListOffsets reports earliest, latest,
// by timestamp and max timestamp.
func TestDeleteRecordsAndListOffsets(t *testing.T) {
	n := tc.Start(t)
	adm := tc.Admin(t, n.Addr())
	ctx := ctxT(t, 30*time.Second)
	tc.CreateTopic(t, n.Addr(), "del", 1, nil)
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("del"))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := 0; i < 100; i++ {
		produceSync(t, cl, &kgo.Record{Value: []byte(fmt.Sprint(i)), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	offs, err := adm.ListOffsetsAfterMilli(ctx, base.Add(30*time.Second).UnixMilli(), "del")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("del", 0); o.Offset != 30 {
		t.Fatalf("offset for timestamp +30s = %d, want 30", o.Offset)
	}
	mt, err := adm.ListMaxTimestampOffsets(ctx, "del")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := mt.Lookup("del", 0); o.Offset != 99 || o.Timestamp != base.Add(99*time.Second).UnixMilli() {
		t.Fatalf("max timestamp offset %d ts %d", o.Offset, o.Timestamp)
	}

	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "del", Partition: 0, At: 50})
	dr, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup("del", 0); r.Err != nil || r.LowWatermark != 50 {
		t.Fatalf("delete records: %+v", r)
	}
	starts, _ := adm.ListStartOffsets(ctx, "del")
	if o, _ := starts.Lookup("del", 0); o.Offset != 50 {
		t.Fatalf("start offset %d, want 50", o.Offset)
	}
	got := consumeN(t, n.Addr(), "del", 50)
	if got[0].Offset != 50 || string(got[0].Value) != "50" {
		t.Fatalf("first record after DeleteRecords: offset %d value %s", got[0].Offset, got[0].Value)
	}
	os = kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "del", Partition: 0, At: 500})
	dr, _ = adm.DeleteRecords(ctx, os)
	if r, _ := dr.Lookup("del", 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete beyond the end: %v", r.Err)
	}
}

// Segments past retention.ms are deleted whole; the active one stays.
func TestRetentionDeletesOldSegments(t *testing.T) {
	n := tc.Start(t, tc.With("log.retention.check.interval.ms", "50"))
	adm := tc.Admin(t, n.Addr())
	ctx := ctxT(t, 30*time.Second)
	tc.CreateTopic(t, n.Addr(), "ret", 1, map[string]*string{"segment.bytes": strp("2048"), "retention.ms": strp("60000")})
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("ret"))
	old := time.Now().Add(-time.Hour)
	for i := 0; i < 50; i++ {
		produceSync(t, cl, &kgo.Record{Value: make([]byte, 200), Timestamp: old})
	}
	produceSync(t, cl, &kgo.Record{Value: []byte("fresh")})
	poll.Until(t, 10*time.Second, func() error {
		starts, err := adm.ListStartOffsets(ctx, "ret")
		if err != nil {
			return err
		}
		if o, _ := starts.Lookup("ret", 0); o.Offset < 40 {
			return fmt.Errorf("log start offset %d", o.Offset)
		}
		return nil
	})
	got := consumeN(t, n.Addr(), "ret", 1)
	if string(got[len(got)-1].Value) != "fresh" && len(got) == 1 {
		t.Fatalf("unexpected record after retention")
	}
}

// Cluster description, log dirs and the metrics endpoint.
func TestClusterDescribeLogDirsMetrics(t *testing.T) {
	n := tc.Start(t)
	adm := tc.Admin(t, n.Addr())
	ctx := ctxT(t, 30*time.Second)
	tc.CreateTopic(t, n.Addr(), "m", 2, nil)
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("m"))
	produceSync(t, cl, &kgo.Record{Value: []byte("hello")})

	meta, err := adm.BrokerMetadata(ctx)
	if err != nil || len(meta.Brokers) != 1 || meta.Cluster == "" {
		t.Fatalf("metadata: %v %+v", err, meta)
	}
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, tc.Client(t, n.Addr()))
	if err != nil || dc.ErrorCode != 0 {
		t.Fatalf("describe cluster: %v %d", err, dc.ErrorCode)
	}
	if dc.ClusterID != meta.Cluster || len(dc.Brokers) != 1 {
		t.Fatalf("cluster id %q vs %q, %d brokers", dc.ClusterID, meta.Cluster, len(dc.Brokers))
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) { size += p.Size })
	})
	if size <= 0 {
		t.Fatalf("log dirs report %d bytes", size)
	}
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`berth_partition_log_end_offset{partition="0",topic="m"}`, "berth_log_fsyncs_total", "berth_server_connections"} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
}
