package config

// Group configs: a share group's settings, set with IncrementalAlterConfigs
// (or AlterConfigs) on the GROUP resource and kept cluster-wide in the
// metadata log. Each falls back to a broker setting (group.share.* for
// share.*) or to a built-in default. The names are Kafka's (GroupConfig,
// KIP-932, KIP-1191) except the retry backoff, Berth's addition; they are
// internal/share's (a test in internal/sharepart keeps the two the same).
// This file knows them as strings; internal/sharepart resolves a group's
// values into its share-partition settings and checks a change as a
// whole (ResolveGroupConfig, CheckGroupConfigs).

import (
	"errors"
	"sort"
	"strings"
	"sync"
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
	{Name: "share.record.lock.duration.ms", Kind: KindInt, Topic: "group.share.record.lock.duration.ms", Doc: "Acquisition lock of a record a member of this share group fetched; between group.share.min.record.lock.duration.ms and group.share.max.record.lock.duration.ms.", Valid: atLeast(1000)},
	{Name: "share.delivery.count.limit", Kind: KindInt, Topic: "group.share.delivery.count.limit", Doc: "Deliveries after which a released or lock-expired record is archived, or parked in the dead-letter topic; between group.share.min.delivery.count.limit and group.share.max.delivery.count.limit.", Valid: atLeast(2)},
	{Name: "share.partition.max.record.locks", Kind: KindInt, Topic: "group.share.partition.max.record.locks", Doc: "Most in-flight records of one share-partition of this group; between group.share.min.partition.max.record.locks and group.share.max.partition.max.record.locks.", Valid: atLeast(1)},
	{Name: "share.session.timeout.ms", Kind: KindInt, Topic: "group.share.session.timeout.ms", Doc: "Session timeout of this share group's members: one silent this long is removed and its records go to the others; between group.share.min.session.timeout.ms and group.share.max.session.timeout.ms, above share.heartbeat.interval.ms.", Valid: atLeast(1)},
	{Name: "share.heartbeat.interval.ms", Kind: KindInt, Topic: "group.share.heartbeat.interval.ms", Doc: "Heartbeat interval the coordinator gives this share group's members; between group.share.min.heartbeat.interval.ms and group.share.max.heartbeat.interval.ms, below share.session.timeout.ms.", Valid: atLeast(1)},
	{Name: "share.auto.offset.reset", Kind: KindString, Default: "latest", Doc: "Where a share-partition with no state starts: latest, earliest or by_duration:<ISO-8601 duration> (the first record at most that old, e.g. by_duration:PT1H).", Valid: validAutoOffsetReset},
	{Name: "share.isolation.level", Kind: KindString, Default: ReadUncommitted, Doc: "How the group reads transactional records: read_uncommitted delivers every record, read_committed only committed ones (none of an aborted transaction, none past the last stable offset). Control records are never delivered.", Valid: validIsolation},
	{Name: "errors.deadletterqueue.topic.name", Kind: KindString, Default: "", Doc: "The group's dead-letter topic (KIP-1191): rejected records and records past the delivery limit are written there before they are archived. Must start with errors.deadletterqueue.topic.name.prefix; empty: none."},
	{Name: "errors.deadletterqueue.copy.record.enable", Kind: KindBool, Default: "true", Doc: "Dead-letter records carry the source record's key, value and headers (true, Berth's default) or only the context headers (false, Kafka's default)."},
	{Name: "share.retry.backoff.initial.ms", Kind: KindInt, Topic: "group.share.retry.backoff.initial.ms", Doc: "Berth addition: delay before a released or lock-expired record is delivered again; 0 redelivers at once.", Valid: atLeast(0)},
	{Name: "share.retry.backoff.multiplier", Kind: KindDouble, Topic: "group.share.retry.backoff.multiplier", Doc: "Berth addition: growth of the retry backoff at each further delivery.", Valid: between(1, 1000)},
	{Name: "share.retry.backoff.max.ms", Kind: KindInt, Topic: "group.share.retry.backoff.max.ms", Doc: "Berth addition: the longest retry backoff.", Valid: atLeast(0)},
	{Name: "share.retry.backoff.jitter", Kind: KindDouble, Topic: "group.share.retry.backoff.jitter", Doc: "Berth addition: the backoff is scaled by a random factor in [1-jitter, 1+jitter].", Valid: between(0, 1)},
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
