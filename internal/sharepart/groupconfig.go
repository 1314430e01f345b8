package sharepart

// A share group's configs (the GROUP config resource, internal/config's
// group configs, named as internal/share names them) resolved into its
// settings, and checked as a whole before a change is accepted.

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/pkg/berthmsg"
)

// GroupConfig is a share group's effective settings: its group configs
// over the broker's.
type GroupConfig struct {
	Partition       share.PartitionConfig
	AutoOffsetReset string
	IsolationLevel  string
	// DLQTopic is errors.deadletterqueue.topic.name ("" for none).
	DLQTopic string
	// DLQCopyRecord is errors.deadletterqueue.copy.record.enable.
	DLQCopyRecord bool
	// SessionTimeout and HeartbeatInterval are the membership's
	// (share.session.timeout.ms, share.heartbeat.interval.ms).
	SessionTimeout, HeartbeatInterval time.Duration
}

// ResolveGroupConfig resolves a share group's settings from its configs
// (group) over the broker's (dynamic, then static, then default). A group
// value that does not parse (it was checked when set, so only a
// hand-edited log has one) falls back to the broker's. The error is the
// result's Validate error.
func ResolveGroupConfig(c *config.Config, group, dynamic map[string]string) (GroupConfig, error) {
	get := func(name string) string {
		v, _ := c.ResolveGroup(name, group, dynamic)
		return v
	}
	// A group config's value without the group's own.
	resolveGroupBroker := func(name string) string {
		v, _ := c.ResolveGroup(name, nil, dynamic)
		return v
	}
	num := func(name string) int64 {
		n, err := strconv.ParseInt(get(name), 10, 64)
		if err != nil {
			n, _ = strconv.ParseInt(resolveGroupBroker(name), 10, 64)
		}
		return n
	}
	float := func(name string) float64 {
		f, err := strconv.ParseFloat(get(name), 64)
		if err != nil {
			f, _ = strconv.ParseFloat(resolveGroupBroker(name), 64)
		}
		return f
	}
	ms := func(name string) time.Duration { return time.Duration(num(name)) * time.Millisecond }
	pc := share.PartitionDefaults()
	pc.LockDuration = ms(share.ConfigRecordLockDurationMs)
	pc.DeliveryCountLimit = int(num(share.ConfigDeliveryCountLimit))
	pc.MaxRecordLocks = int(num(share.ConfigMaxRecordLocks))
	pc.Backoff = share.Backoff{
		Initial:    ms(share.ConfigRetryBackoffInitialMs),
		Multiplier: float(share.ConfigRetryBackoffMultiplier),
		Max:        ms(share.ConfigRetryBackoffMaxMs),
		Jitter:     float(share.ConfigRetryBackoffJitter),
	}
	g := GroupConfig{
		AutoOffsetReset:   get(share.ConfigAutoOffsetReset),
		IsolationLevel:    get(share.ConfigIsolationLevel),
		DLQTopic:          get(berthmsg.ConfigDLQTopicName),
		SessionTimeout:    ms(share.ConfigSessionTimeoutMs),
		HeartbeatInterval: ms(share.ConfigHeartbeatIntervalMs),
	}
	g.DLQCopyRecord, _ = strconv.ParseBool(get(berthmsg.ConfigDLQCopyRecordEnable))
	pc.DeadLetter = g.DLQTopic != ""
	g.Partition = pc
	if g.HeartbeatInterval >= g.SessionTimeout {
		return g, fmt.Errorf("%s (%v) must be less than %s (%v)", share.ConfigHeartbeatIntervalMs, g.HeartbeatInterval.Milliseconds(),
			share.ConfigSessionTimeoutMs, g.SessionTimeout.Milliseconds())
	}
	return g, pc.Validate()
}

// ErrInvalidGroupConfig is returned by CheckGroupConfigs.
var ErrInvalidGroupConfig = errors.New("invalid group config")

// CheckGroupConfigs checks a group's configs as they would be after a
// change: known names, values of the right kind, the broker's bounds on
// the lock duration, delivery limit, record locks, session timeout and
// heartbeat interval (Kafka's), the heartbeat below the session timeout, the
// dead-letter topic prefix, and the resulting share-partition settings.
// It does not check the by_duration syntax or the dead-letter topic's
// name rules (the caller does, with ParseISODuration and metadata).
func CheckGroupConfigs(c *config.Config, group, dynamic map[string]string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidGroupConfig, fmt.Sprintf(format, args...))
	}
	names := make([]string, 0, len(group))
	for k := range group {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		d, ok := config.LookupGroup(k)
		if !ok {
			return bad("unknown group config %q; the group configs are listed in docs/configuration.md (Group configs)", k)
		}
		if err := d.CheckValue(group[k]); err != nil {
			return bad("%v", err)
		}
	}
	bounded := []struct{ name, lo, hi string }{
		{share.ConfigRecordLockDurationMs, "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"},
		{share.ConfigDeliveryCountLimit, "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"},
		{share.ConfigMaxRecordLocks, "group.share.min.partition.max.record.locks", "group.share.max.partition.max.record.locks"},
		{share.ConfigSessionTimeoutMs, "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"},
		{share.ConfigHeartbeatIntervalMs, "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"},
	}
	for _, b := range bounded {
		s, ok := group[b.name]
		if !ok {
			continue
		}
		v, _ := strconv.ParseInt(s, 10, 64)
		lo, _ := c.ResolveBroker(b.lo, dynamic)
		hi, _ := c.ResolveBroker(b.hi, dynamic)
		l, _ := strconv.ParseInt(lo, 10, 64)
		h, _ := strconv.ParseInt(hi, 10, 64)
		if v < l || v > h {
			return bad("%s %d is outside [%d, %d]; pick a value in that range, or change the broker settings %s and %s",
				b.name, v, l, h, b.lo, b.hi)
		}
	}
	if t := group[berthmsg.ConfigDLQTopicName]; t != "" {
		prefix, _ := c.ResolveBroker(berthmsg.BrokerDLQTopicNamePrefix, dynamic)
		if !strings.HasPrefix(t, prefix) {
			return bad("%s %q does not start with %q (the broker's %s); name the dead-letter topic %s%s",
				berthmsg.ConfigDLQTopicName, t, prefix, berthmsg.BrokerDLQTopicNamePrefix, prefix, t)
		}
	}
	if _, err := ResolveGroupConfig(c, group, dynamic); err != nil {
		return bad("%v", err)
	}
	return nil
}
