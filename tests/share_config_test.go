package tests

// Share group configs (the GROUP config resource of DescribeConfigs,
// IncrementalAlterConfigs and AlterConfigs) through kmsg requests sent
// with kgo: describe with defaults and sources, set, delete, replace,
// refusals with INVALID_CONFIG, survival across a restart, and the
// settings taking effect (share.auto.offset.reset, the retry backoff).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// groupConfig is one described group config.
type groupConfig struct {
	value  string
	source kmsg.ConfigSource
}

// describeGroupConfigs returns every config of group's GROUP resource.
func describeGroupConfigs(t *testing.T, cl *kgo.Client, group string) map[string]groupConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	req.Resources = append(req.Resources, rr)
	req.IncludeSynonyms = true
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 1 {
		t.Fatalf("%d resources in the answer", len(resp.Resources))
	}
	res := resp.Resources[0]
	if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
		t.Fatalf("describing group %s: %v (%v)", group, err, res.ErrorMessage)
	}
	out := map[string]groupConfig{}
	for _, c := range res.Configs {
		v := ""
		if c.Value != nil {
			v = *c.Value
		}
		out[c.Name] = groupConfig{v, c.Source}
	}
	return out
}

// alterGroupConfigs sends one IncrementalAlterConfigs for group: name=value
// pairs are SET, a value of "-" DELETEs. It returns the resource's error
// with its message.
func alterGroupConfigs(t *testing.T, cl *kgo.Client, group string, kv ...string) error {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name = kv[i]
		if kv[i+1] == "-" {
			c.Op = kmsg.IncrementalAlterConfigOpDelete
		} else {
			v := kv[i+1]
			c.Op, c.Value = kmsg.IncrementalAlterConfigOpSet, &v
		}
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	res := resp.Resources[0]
	if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
		msg := ""
		if res.ErrorMessage != nil {
			msg = *res.ErrorMessage
		}
		return fmt.Errorf("%w: %s", err, msg)
	}
	return nil
}

// setGroupConfigs sets group configs or fails the test.
func setGroupConfigs(t *testing.T, cl *kgo.Client, group string, kv ...string) {
	t.Helper()
	if err := alterGroupConfigs(t, cl, group, kv...); err != nil {
		t.Fatalf("setting configs of group %s: %v", group, err)
	}
}

func TestShareConfigDescribeSetDelete(t *testing.T) {
	dir := t.TempDir()
	n := tc.StartIn(t, dir, tc.With("group.share.retry.backoff.initial.ms", "300"))
	cl := tc.Client(t, n.Addr())

	// A group with no configs (it need not exist) shows every config with
	// the broker setting or built-in default it falls back to.
	got := describeGroupConfigs(t, cl, "shipments")
	for name, want := range map[string]groupConfig{
		"share.record.lock.duration.ms":             {"30000", kmsg.ConfigSourceDefaultConfig},
		"share.delivery.count.limit":                {"5", kmsg.ConfigSourceDefaultConfig},
		"share.partition.max.record.locks":          {"2000", kmsg.ConfigSourceDefaultConfig},
		"share.auto.offset.reset":                   {"latest", kmsg.ConfigSourceDefaultConfig},
		"share.isolation.level":                     {"read_uncommitted", kmsg.ConfigSourceDefaultConfig},
		"errors.deadletterqueue.topic.name":         {"", kmsg.ConfigSourceDefaultConfig},
		"errors.deadletterqueue.copy.record.enable": {"true", kmsg.ConfigSourceDefaultConfig},
		"share.retry.backoff.initial.ms":            {"300", kmsg.ConfigSourceStaticBrokerConfig},
		"share.retry.backoff.multiplier":            {"2", kmsg.ConfigSourceDefaultConfig},
		"share.retry.backoff.max.ms":                {"300000", kmsg.ConfigSourceDefaultConfig},
		"share.retry.backoff.jitter":                {"0.2", kmsg.ConfigSourceDefaultConfig},
		"share.session.timeout.ms":                  {"45000", kmsg.ConfigSourceDefaultConfig},
		"share.heartbeat.interval.ms":               {"5000", kmsg.ConfigSourceDefaultConfig},
	} {
		if got[name] != want {
			t.Errorf("%s: described %+v, want %+v", name, got[name], want)
		}
	}
	if len(got) != 13 {
		t.Errorf("described %d group configs, want 13: %v", len(got), got)
	}

	setGroupConfigs(t, cl, "shipments",
		"share.delivery.count.limit", "3",
		"errors.deadletterqueue.topic.name", "dlq.shipments",
		"share.auto.offset.reset", "by_duration:PT1H",
		"share.retry.backoff.multiplier", "1.5")
	got = describeGroupConfigs(t, cl, "shipments")
	for name, want := range map[string]string{
		"share.delivery.count.limit":        "3",
		"errors.deadletterqueue.topic.name": "dlq.shipments",
		"share.auto.offset.reset":           "by_duration:PT1H",
		"share.retry.backoff.multiplier":    "1.5",
	} {
		if got[name] != (groupConfig{want, kmsg.ConfigSourceGroupConfig}) {
			t.Errorf("%s: described %+v after the change, want %s from GROUP_CONFIG", name, got[name], want)
		}
	}
	// Another group is untouched.
	if other := describeGroupConfigs(t, cl, "other"); other["share.delivery.count.limit"].value != "5" {
		t.Errorf("group other sees %v", other["share.delivery.count.limit"])
	}

	// DELETE goes back to the default.
	setGroupConfigs(t, cl, "shipments", "share.auto.offset.reset", "-")
	if g := describeGroupConfigs(t, cl, "shipments")["share.auto.offset.reset"]; g != (groupConfig{"latest", kmsg.ConfigSourceDefaultConfig}) {
		t.Errorf("after DELETE: %+v", g)
	}

	// AlterConfigs replaces the whole set.
	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "shipments"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.record.lock.duration.ms", kmsg.StringPtr("45000")
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	aresp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil || aresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v %+v", err, aresp)
	}
	got = describeGroupConfigs(t, cl, "shipments")
	if got["share.record.lock.duration.ms"].value != "45000" || got["share.delivery.count.limit"].source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("after AlterConfigs: lock %+v, limit %+v", got["share.record.lock.duration.ms"], got["share.delivery.count.limit"])
	}

	// The configs are in the metadata log: a restart keeps them.
	n.Close()
	n = tc.StartIn(t, dir, tc.With("group.share.retry.backoff.initial.ms", "300"))
	cl = tc.Client(t, n.Addr())
	if g := describeGroupConfigs(t, cl, "shipments")["share.record.lock.duration.ms"]; g != (groupConfig{"45000", kmsg.ConfigSourceGroupConfig}) {
		t.Errorf("after a restart: %+v", g)
	}
}

func TestShareConfigInvalidValues(t *testing.T) {
	n := tc.Start(t)
	cl := tc.Client(t, n.Addr())
	for _, c := range []struct {
		kv   []string
		want string // in the error message
	}{
		{[]string{"share.delivery.count.limit", "11"}, "group.share.max.delivery.count.limit"},
		{[]string{"share.delivery.count.limit", "many"}, "not a 32-bit integer"},
		{[]string{"share.record.lock.duration.ms", "5000"}, "group.share.min.record.lock.duration.ms"},
		{[]string{"share.partition.max.record.locks", "50000"}, "group.share.max.partition.max.record.locks"},
		{[]string{"share.auto.offset.reset", "newest"}, "by_duration"},
		{[]string{"share.auto.offset.reset", "by_duration:1h"}, "ISO-8601"},
		{[]string{"share.isolation.level", "committed"}, "read_uncommitted or read_committed"},
		{[]string{"errors.deadletterqueue.topic.name", "shipments-dlq"}, "dlq.shipments-dlq"},
		{[]string{"errors.deadletterqueue.topic.name", "dlq.bad name"}, "may only contain"},
		{[]string{"errors.deadletterqueue.copy.record.enable", "yes"}, "true or false"},
		{[]string{"share.retry.backoff.initial.ms", "60000", "share.retry.backoff.max.ms", "1000"}, "share.retry.backoff.max.ms"},
		{[]string{"share.retry.backoff.jitter", "1.5"}, "between 0 and 1"},
		{[]string{"share.retry.backoff.multiplier", "0.5"}, "between 1 and"},
		{[]string{"share.session.timeout.ms", "70000"}, "group.share.max.session.timeout.ms"},
		{[]string{"share.heartbeat.interval.ms", "1000"}, "group.share.min.heartbeat.interval.ms"},
		{[]string{"consumer.session.timeout.ms", "50000"}, "unknown group config"},
	} {
		err := alterGroupConfigs(t, cl, "g", c.kv...)
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want INVALID_CONFIG mentioning %q", c.kv, err, c.want)
		}
	}
	// Nothing was stored.
	for name, g := range describeGroupConfigs(t, cl, "g") {
		if g.source == kmsg.ConfigSourceGroupConfig {
			t.Errorf("refused change stored %s=%s", name, g.value)
		}
	}
	// The bounds follow the broker's settings.
	n2 := tc.Start(t, tc.With("group.share.min.record.lock.duration.ms", "1000"))
	setGroupConfigs(t, tc.Client(t, n2.Addr()), "g", "share.record.lock.duration.ms", "5000")
}

// share.auto.offset.reset=earliest set as a group config: a new share
// group starts at the log start, so records produced before any member
// joined are delivered.
func TestShareConfigAutoOffsetResetEarliest(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "backlog", 1, nil)
	prod := tc.Client(t, n.Addr())
	setGroupConfigs(t, prod, "catch-up", "share.auto.offset.reset", "earliest")
	for i := range 3 {
		produceSync(t, prod, &kgo.Record{Topic: "backlog", Value: fmt.Appendf(nil, "old-%d", i)})
	}
	cl := shareConsumer(t, n.Addr(), "catch-up", "backlog")
	got := map[string]bool{}
	poll.Until(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, cl, 500*time.Millisecond) {
			got[string(r.Value)] = true
			r.Ack(kgo.AckAccept)
		}
		if len(got) < 3 {
			return fmt.Errorf("received %v of the 3 old records", got)
		}
		return nil
	})
}

// The retry backoff set as a group config (not the broker's) is honoured:
// a released record comes back no sooner than the group's initial backoff.
func TestShareConfigRetryBackoffHonoured(t *testing.T) {
	// The broker default redelivers at once; the group asks for 1.5 s.
	n := tc.Start(t, tc.With("group.share.retry.backoff.initial.ms", "0"))
	tc.CreateTopic(t, n.Addr(), "slow", 1, nil)
	prod := tc.Client(t, n.Addr())
	setGroupConfigs(t, prod, "backoff",
		"share.retry.backoff.initial.ms", "1500",
		"share.retry.backoff.max.ms", "1500",
		"share.retry.backoff.jitter", "0",
		"share.auto.offset.reset", "earliest")
	produceSync(t, prod, &kgo.Record{Topic: "slow", Value: []byte("job")})
	cl := shareConsumer(t, n.Addr(), "backoff", "slow")

	var first *kgo.Record
	poll.Until(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, cl, 500*time.Millisecond) {
			if string(r.Value) == "job" {
				first = r
			}
		}
		if first == nil {
			return errors.New("job not delivered")
		}
		return nil
	})
	first.Ack(kgo.AckRelease)
	released := time.Now()
	if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	var again *kgo.Record
	deadline := time.Now().Add(30 * time.Second)
	for again == nil {
		if time.Now().After(deadline) {
			t.Fatal("released job not delivered again")
		}
		for _, r := range pollFor(t, cl, 500*time.Millisecond) {
			if string(r.Value) == "job" {
				again = r
			}
		}
	}
	if d := time.Since(released); d < 1500*time.Millisecond {
		t.Fatalf("released job redelivered after %v, before the group's 1.5 s backoff", d)
	}
	if again.DeliveryCount() != 2 {
		t.Fatalf("delivery count %d, want 2", again.DeliveryCount())
	}
	again.Ack(kgo.AckAccept)
	_ = cl.FlushAcks(context.Background())
}

// DeleteGroups of a share group deletes its configs too (Kafka's
// behaviour); a group that is not deleted keeps them.
func TestShareConfigDeletedWithGroup(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "tasks", 1, nil)
	prod := tc.Client(t, n.Addr())
	setGroupConfigs(t, prod, "temp", "share.delivery.count.limit", "4", "share.auto.offset.reset", "earliest")
	produceSync(t, prod, &kgo.Record{Topic: "tasks", Value: []byte("t")})
	cl := shareConsumer(t, n.Addr(), "temp", "tasks")
	receiveJob(t, cl, "t").Ack(kgo.AckAccept)
	if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	cl.Close() // leaves the group: it is empty and can be deleted

	adm := tc.Admin(t, n.Addr())
	poll.Until(t, 30*time.Second, func() error {
		resp, err := adm.DeleteGroups(ctxT(t, 10*time.Second), "temp")
		if err != nil {
			return err
		}
		return resp["temp"].Err
	})
	got := describeGroupConfigs(t, prod, "temp")
	if g := got["share.delivery.count.limit"]; g != (groupConfig{"5", kmsg.ConfigSourceDefaultConfig}) {
		t.Errorf("after DeleteGroups: %+v, want the default", g)
	}
}

// A share group's own share.session.timeout.ms and
// share.heartbeat.interval.ms: members are told the group's interval,
// one that stops heartbeating leaves after the group's timeout while
// another group keeps the broker's, and values outside the broker's
// bounds (or a heartbeat not below the timeout) are refused.
func TestShareGroupSessionTimeoutConfig(t *testing.T) {
	n := tc.Start(t, tc.With("group.share.min.session.timeout.ms", "2000"), tc.With("group.share.min.heartbeat.interval.ms", "500"))
	tc.CreateTopic(t, n.Addr(), "jobs", 1, nil)
	cl := tc.Client(t, n.Addr())
	ctx := ctxT(t, 60*time.Second)

	if err := alterGroupConfigs(t, cl, "fast", "share.session.timeout.ms", "1000"); !errors.Is(err, kerr.InvalidConfig) ||
		!strings.Contains(err.Error(), "group.share.min.session.timeout.ms") {
		t.Fatalf("share.session.timeout.ms below the broker's minimum: %v, want INVALID_CONFIG naming the bound", err)
	}
	if err := alterGroupConfigs(t, cl, "fast", "share.session.timeout.ms", "2000", "share.heartbeat.interval.ms", "2000"); !errors.Is(err, kerr.InvalidConfig) ||
		!strings.Contains(err.Error(), "must be less than share.session.timeout.ms") {
		t.Fatalf("heartbeat equal to the session timeout: %v, want INVALID_CONFIG", err)
	}
	setGroupConfigs(t, cl, "fast", "share.session.timeout.ms", "2000", "share.heartbeat.interval.ms", "500")
	if got := describeGroupConfigs(t, cl, "fast")["share.session.timeout.ms"]; got != (groupConfig{"2000", kmsg.ConfigSourceGroupConfig}) {
		t.Fatalf("described %+v", got)
	}

	var fast *kmsg.ShareGroupHeartbeatResponse
	poll.Until(t, 30*time.Second, func() error { // the first join creates __consumer_offsets
		var err error
		fast, err = shareHeartbeat(ctx, cl, "fast", "worker-1", 0, []string{"jobs"})
		return err
	})
	if fast.HeartbeatIntervalMillis != 500 {
		t.Fatalf("fast group's heartbeat interval %d ms, want its own 500", fast.HeartbeatIntervalMillis)
	}
	slow, err := shareHeartbeat(ctx, cl, "slow", "worker-2", 0, []string{"jobs"})
	if err != nil || slow.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("slow group: interval %v ms, %v; want the broker's 5000", slow.HeartbeatIntervalMillis, err)
	}
	// worker-1 goes silent: gone after the group's 2 s, worker-2 stays.
	start := time.Now()
	poll.Until(t, 20*time.Second, func() error {
		g, err := describeShare(ctx, cl, "fast")
		if err != nil {
			return err
		}
		if len(g.Members) != 0 {
			return fmt.Errorf("fast group still has %d members", len(g.Members))
		}
		return nil
	})
	if el := time.Since(start); el < 1500*time.Millisecond || el > 10*time.Second {
		t.Errorf("the silent member left after %v, want about the group's 2 s", el)
	}
	if g, err := describeShare(ctx, cl, "slow"); err != nil || len(g.Members) != 1 {
		t.Fatalf("slow group (the broker's 45 s): %+v, %v", g, err)
	}
}
