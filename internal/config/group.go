package config

// Group configs: a share group's settings, set with IncrementalAlterConfigs
// (or AlterConfigs) on the GROUP resource and kept cluster-wide in the
// metadata log. Each falls back to a broker setting (group.share.* for
// share.*) or to a built-in default. The names are Kafka's (GroupConfig,
// KIP-932, KIP-1191) except the retry backoff, Berth's addition.

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/pkg/berthmsg"
)

// FromGroup is DescribeConfigs' GROUP_CONFIG source: a value set on the
// group itself.
const FromGroup ValueSource = 8

// Share isolation levels (share.isolation.level).
const (
	ReadUncommitted = "read_uncommitted"
	ReadCommitted   = "read_committed"
)

// groupDefs are the group configs. Def.Topic names the broker setting a
// config falls back to ("" when it has none); Default is filled in from
// that setting's default.
var groupDefs = []Def{
	{Name: share.ConfigRecordLockDurationMs, Kind: KindInt, Topic: share.BrokerRecordLockDurationMs, Doc: "Acquisition lock of a record a member of this share group fetched; between group.share.min.record.lock.duration.ms and group.share.max.record.lock.duration.ms.", Valid: atLeast(1000)},
	{Name: share.ConfigDeliveryCountLimit, Kind: KindInt, Topic: share.BrokerDeliveryCountLimit, Doc: "Deliveries after which a released or lock-expired record is archived, or parked in the dead-letter topic; between group.share.min.delivery.count.limit and group.share.max.delivery.count.limit.", Valid: atLeast(2)},
	{Name: share.ConfigMaxRecordLocks, Kind: KindInt, Topic: share.BrokerMaxRecordLocks, Doc: "Most in-flight records of one share-partition of this group; between group.share.min.partition.max.record.locks and group.share.max.partition.max.record.locks.", Valid: atLeast(1)},
	{Name: share.ConfigAutoOffsetReset, Kind: KindString, Default: "latest", Doc: "Where a share-partition with no state starts: latest, earliest or by_duration:<ISO-8601 duration> (the first record at most that old, e.g. by_duration:PT1H).", Valid: validAutoOffsetReset},
	{Name: share.ConfigIsolationLevel, Kind: KindString, Default: ReadUncommitted, Doc: "How the group reads transactional records: read_uncommitted delivers every record, read_committed only committed ones (none of an aborted transaction, none past the last stable offset). Control records are never delivered.", Valid: validIsolation},
	{Name: berthmsg.ConfigDLQTopicName, Kind: KindString, Default: "", Doc: "The group's dead-letter topic (KIP-1191): rejected records and records past the delivery limit are written there before they are archived. Must start with errors.deadletterqueue.topic.name.prefix; empty: none."},
	{Name: berthmsg.ConfigDLQCopyRecordEnable, Kind: KindBool, Default: "true", Doc: "Dead-letter records carry the source record's key, value and headers (true, Berth's default) or only the context headers (false, Kafka's default)."},
	{Name: share.ConfigRetryBackoffInitialMs, Kind: KindInt, Topic: share.BrokerRetryBackoffInitialMs, Doc: "Berth addition: delay before a released or lock-expired record is delivered again; 0 redelivers at once.", Valid: atLeast(0)},
	{Name: share.ConfigRetryBackoffMultiplier, Kind: KindDouble, Topic: share.BrokerRetryBackoffMultiplier, Doc: "Berth addition: growth of the retry backoff at each further delivery.", Valid: between(1, 1000)},
	{Name: share.ConfigRetryBackoffMaxMs, Kind: KindInt, Topic: share.BrokerRetryBackoffMaxMs, Doc: "Berth addition: the longest retry backoff.", Valid: atLeast(0)},
	{Name: share.ConfigRetryBackoffJitter, Kind: KindDouble, Topic: share.BrokerRetryBackoffJitter, Doc: "Berth addition: the backoff is scaled by a random factor in [1-jitter, 1+jitter].", Valid: between(0, 1)},
}

var groupDefsOnce sync.Once

func initGroupDefs() {
	groupDefsOnce.Do(func() {
		for i, d := range groupDefs {
			if d.Topic != "" {
				bd, ok := LookupBroker(d.Topic)
				if !ok {
					panic("config: group config " + d.Name + " falls back to unknown broker setting " + d.Topic)
				}
				groupDefs[i].Default = bd.Default
			}
		}
		sort.Slice(groupDefs, func(i, j int) bool { return groupDefs[i].Name < groupDefs[j].Name })
	})
}

// GroupDefs lists every group config, sorted by name; Def.Topic holds the
// broker setting it falls back to ("" for none).
func GroupDefs() []Def {
	initGroupDefs()
	return append([]Def(nil), groupDefs...)
}

// LookupGroup finds a group config.
func LookupGroup(name string) (Def, bool) {
	initGroupDefs()
	for _, d := range groupDefs {
		if d.Name == name {
			return d, true
		}
	}
	return Def{}, false
}

func validAutoOffsetReset(s string) error {
	if s == "latest" || s == "earliest" || strings.HasPrefix(s, "by_duration:") {
		return nil
	}
	return errors.New("must be latest, earliest or by_duration:<ISO-8601 duration> (e.g. by_duration:PT1H)")
}

func validIsolation(s string) error {
	if s == ReadUncommitted || s == ReadCommitted {
		return nil
	}
	return errors.New("must be read_uncommitted or read_committed")
}

// ResolveGroup returns a group config's effective value: the group's own,
// else its broker setting (dynamic, static, default), else the built-in
// default.
func (c *Config) ResolveGroup(name string, group, dynamic map[string]string) (string, ValueSource) {
	if v, ok := group[name]; ok {
		return v, FromGroup
	}
	d, ok := LookupGroup(name)
	if !ok {
		return "", FromDefault
	}
	if d.Topic == "" {
		return d.Default, FromDefault
	}
	return c.ResolveBroker(d.Topic, dynamic)
}

// ShareGroup is a share group's effective settings.
type ShareGroup struct {
	Partition       share.PartitionConfig
	AutoOffsetReset string
	IsolationLevel  string
	// DLQTopic is errors.deadletterqueue.topic.name ("" for none).
	DLQTopic string
	// DLQCopyRecord is errors.deadletterqueue.copy.record.enable.
	DLQCopyRecord bool
}

// ShareGroup resolves a share group's settings from its configs over the
// broker's (dynamic, then static, then default). A group value that does
// not parse (it was checked when set, so only a hand-edited log has one)
// falls back to the broker's. The error is the result's Validate error.
func (c *Config) ShareGroup(group, dynamic map[string]string) (ShareGroup, error) {
	get := func(name string) string {
		v, _ := c.ResolveGroup(name, group, dynamic)
		return v
	}
	num := func(name string) int64 {
		n, err := strconv.ParseInt(get(name), 10, 64)
		if err != nil {
			n, _ = strconv.ParseInt(c.resolveGroupBroker(name, dynamic), 10, 64)
		}
		return n
	}
	float := func(name string) float64 {
		f, err := strconv.ParseFloat(get(name), 64)
		if err != nil {
			f, _ = strconv.ParseFloat(c.resolveGroupBroker(name, dynamic), 64)
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
	g := ShareGroup{
		AutoOffsetReset: get(share.ConfigAutoOffsetReset),
		IsolationLevel:  get(share.ConfigIsolationLevel),
		DLQTopic:        get(berthmsg.ConfigDLQTopicName),
	}
	g.DLQCopyRecord, _ = strconv.ParseBool(get(berthmsg.ConfigDLQCopyRecordEnable))
	pc.DeadLetter = g.DLQTopic != ""
	g.Partition = pc
	return g, pc.Validate()
}

// resolveGroupBroker is a group config's value without the group's own.
func (c *Config) resolveGroupBroker(name string, dynamic map[string]string) string {
	v, _ := c.ResolveGroup(name, nil, dynamic)
	return v
}

// ErrInvalidGroupConfig is returned by CheckGroupConfigs.
var ErrInvalidGroupConfig = errors.New("invalid group config")

// CheckGroupConfigs checks a group's configs as they would be after a
// change: known names, values of the right kind, the broker's bounds on
// the lock duration, delivery limit and record locks (Kafka's), the
// dead-letter topic prefix, and the resulting share-partition settings.
// It does not check the by_duration syntax or the dead-letter topic's
// name rules (the caller does, with sharepart and metadata).
func (c *Config) CheckGroupConfigs(group, dynamic map[string]string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidGroupConfig, fmt.Sprintf(format, args...))
	}
	names := make([]string, 0, len(group))
	for k := range group {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		d, ok := LookupGroup(k)
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
	if _, err := c.ShareGroup(group, dynamic); err != nil {
		return bad("%v", err)
	}
	return nil
}
