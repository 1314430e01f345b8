package sharepart

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/pkg/berthmsg"
)

// Group configs resolve over the broker settings and are checked as a
// whole, against the broker's bounds, with messages that say what to do.
func TestShareGroupConfigs(t *testing.T) {
	c := config.Defaults()
	if err := c.Set("group.share.retry.backoff.initial.ms", "100", config.SourceFlag); err != nil {
		t.Fatal(err)
	}
	dynamic := map[string]string{"errors.deadletterqueue.topic.name.prefix": "parked."}
	g, err := ResolveGroupConfig(c, map[string]string{"share.delivery.count.limit": "3", "errors.deadletterqueue.topic.name": "parked.jobs"}, dynamic)
	if err != nil {
		t.Fatal(err)
	}
	if g.Partition.DeliveryCountLimit != 3 || g.Partition.Backoff.Initial != 100*time.Millisecond ||
		g.Partition.Backoff.Multiplier != 2 || g.Partition.LockDuration != 30*time.Second ||
		!g.Partition.DeadLetter || g.DLQTopic != "parked.jobs" || !g.DLQCopyRecord || g.AutoOffsetReset != "latest" {
		t.Fatalf("resolved %+v", g)
	}
	for _, tc := range []struct {
		cfg  map[string]string
		want string
	}{
		{map[string]string{"share.delivery.count.limit": "11"}, "group.share.max.delivery.count.limit"},
		{map[string]string{"share.record.lock.duration.ms": "1000"}, "group.share.min.record.lock.duration.ms"},
		{map[string]string{"share.retry.backoff.initial.ms": "5000", "share.retry.backoff.max.ms": "10"}, "share.retry.backoff.max.ms"},
		{map[string]string{"share.retry.backoff.jitter": "2"}, "between 0 and 1"},
		{map[string]string{"share.isolation.level": "committed"}, "read_uncommitted or read_committed"},
		{map[string]string{"share.auto.offset.reset": "newest"}, "by_duration"},
		{map[string]string{"errors.deadletterqueue.topic.name": "jobs-dlq"}, `name the dead-letter topic parked.jobs-dlq`},
		{map[string]string{"share.unknown": "1"}, "unknown group config"},
		{map[string]string{"errors.deadletterqueue.copy.record.enable": "yes"}, "true or false"},
		{map[string]string{"share.session.timeout.ms": "10000"}, "group.share.min.session.timeout.ms"},
		{map[string]string{"share.heartbeat.interval.ms": "20000"}, "group.share.max.heartbeat.interval.ms"},
	} {
		err := CheckGroupConfigs(c, tc.cfg, dynamic)
		if !errors.Is(err, ErrInvalidGroupConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error mentioning %q", tc.cfg, err, tc.want)
		}
	}
	if err := CheckGroupConfigs(c, map[string]string{"share.auto.offset.reset": "by_duration:PT1H", "share.delivery.count.limit": "10"}, dynamic); err != nil {
		t.Fatal(err)
	}
	for _, level := range []string{"read_committed", "read_uncommitted"} {
		if err := CheckGroupConfigs(c, map[string]string{"share.isolation.level": level}, dynamic); err != nil {
			t.Errorf("share.isolation.level=%s: %v", level, err)
		}
	}
	// The membership's timeouts: the broker's by default, the group's
	// within the broker's bounds, the heartbeat below the timeout.
	if g.SessionTimeout != 45*time.Second || g.HeartbeatInterval != 5*time.Second {
		t.Errorf("default session timeout %v, heartbeat %v; want the broker's 45s, 5s", g.SessionTimeout, g.HeartbeatInterval)
	}
	bounds := map[string]string{"group.share.min.session.timeout.ms": "6000", "group.share.min.heartbeat.interval.ms": "1000"}
	for k, v := range bounds {
		dynamic[k] = v
	}
	own := map[string]string{"share.session.timeout.ms": "6000", "share.heartbeat.interval.ms": "2000"}
	if err := CheckGroupConfigs(c, own, dynamic); err != nil {
		t.Fatal(err)
	}
	if g, err := ResolveGroupConfig(c, own, dynamic); err != nil || g.SessionTimeout != 6*time.Second || g.HeartbeatInterval != 2*time.Second {
		t.Errorf("%v resolves to session %v, heartbeat %v, %v", own, g.SessionTimeout, g.HeartbeatInterval, err)
	}
	err = CheckGroupConfigs(c, map[string]string{"share.session.timeout.ms": "6000"}, dynamic) // the broker's 5 s heartbeat stays below
	if err != nil {
		t.Fatal(err)
	}
	err = CheckGroupConfigs(c, map[string]string{"share.session.timeout.ms": "6000", "share.heartbeat.interval.ms": "6000"}, dynamic)
	if !errors.Is(err, ErrInvalidGroupConfig) || !strings.Contains(err.Error(), "share.heartbeat.interval.ms (6000) must be less than share.session.timeout.ms (6000)") {
		t.Errorf("heartbeat equal to the session timeout: %v", err)
	}
	if g, err := ResolveGroupConfig(c, map[string]string{"share.isolation.level": "read_committed"}, dynamic); err != nil || g.IsolationLevel != config.ReadCommitted {
		t.Errorf("share.isolation.level=read_committed resolves to %+v, %v", g, err)
	}
}

// The group configs internal/config lists are internal/share's names,
// falling back to the broker settings share names.
func TestGroupConfigNames(t *testing.T) {
	for _, tc := range []struct{ group, broker string }{
		{share.ConfigRecordLockDurationMs, share.BrokerRecordLockDurationMs},
		{share.ConfigDeliveryCountLimit, share.BrokerDeliveryCountLimit},
		{share.ConfigMaxRecordLocks, share.BrokerMaxRecordLocks},
		{share.ConfigRetryBackoffInitialMs, share.BrokerRetryBackoffInitialMs},
		{share.ConfigRetryBackoffMultiplier, share.BrokerRetryBackoffMultiplier},
		{share.ConfigRetryBackoffMaxMs, share.BrokerRetryBackoffMaxMs},
		{share.ConfigRetryBackoffJitter, share.BrokerRetryBackoffJitter},
		{share.ConfigSessionTimeoutMs, share.BrokerSessionTimeoutMs},
		{share.ConfigHeartbeatIntervalMs, share.BrokerHeartbeatIntervalMs},
		{share.ConfigAutoOffsetReset, ""},
		{share.ConfigIsolationLevel, ""},
		{berthmsg.ConfigDLQTopicName, ""},
		{berthmsg.ConfigDLQCopyRecordEnable, ""},
	} {
		d, ok := config.LookupGroup(tc.group)
		if !ok || d.Topic != tc.broker {
			t.Errorf("group config %s: known %v, falls back to %q, want %q", tc.group, ok, d.Topic, tc.broker)
		}
	}
	if n := len(config.GroupDefs()); n != 13 {
		t.Errorf("%d group configs, want the 13 above", n)
	}
	if _, ok := config.LookupBroker(berthmsg.BrokerDLQTopicNamePrefix); !ok {
		t.Errorf("broker setting %s unknown", berthmsg.BrokerDLQTopicNamePrefix)
	}
}
