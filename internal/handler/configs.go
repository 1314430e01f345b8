package handler

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/internal/sharepart"
	"github.com/berthmq/berth/pkg/berthmsg"
)

// configEntry is one effective setting for DescribeConfigs.
type configEntry struct {
	name, value string
	source      config.ValueSource
	readOnly    bool
	kind        config.Kind
	doc         string
	synonyms    []configSynonym
	// sensitive: a secret (config.IsSensitive), described without its value.
	sensitive bool
}

type configSynonym struct {
	name, value string
	source      config.ValueSource
}

// topicConfigEntries returns every topic setting's effective value, for
// a topic with these overrides and replication factor rf, as the
// partitions apply them (app.resolveTopic).
func (b *Broker) topicConfigEntries(im *metadata.Image, overrides map[string]string, rf int) []configEntry {
	cl := config.Cluster{Nodes: im.Nodes(), ReplicationFactor: rf}
	resolve := func(name string, overrides, dynamic map[string]string) (string, config.ValueSource) {
		return b.Broker.ResolveTopic(name, overrides, dynamic, cl)
	}
	return b.layeredConfigEntries(im, config.TopicDefs(), resolve, overrides, config.FromTopic, cl)
}

// layeredConfigEntries returns the effective value of each of defs, a
// resource's settings (topic or group) that fall back to a broker
// setting: resolved by resolve over the resource's overrides, with the
// override (source from) and the broker setting's dynamic, static and
// default (in cl) values as synonyms, as Kafka describes them.
func (b *Broker) layeredConfigEntries(im *metadata.Image, defs []config.Def,
	resolve func(name string, overrides, dynamic map[string]string) (string, config.ValueSource),
	overrides map[string]string, from config.ValueSource, cl config.Cluster) []configEntry {
	var out []configEntry
	for _, d := range defs {
		v, src := resolve(d.Name, overrides, im.BrokerConfigs)
		e := configEntry{name: d.Name, value: v, source: src, kind: d.Kind, doc: d.Doc}
		if o, ok := overrides[d.Name]; ok {
			e.synonyms = append(e.synonyms, configSynonym{d.Name, o, from})
		}
		if d.Topic != "" {
			if dv, ok := im.BrokerConfigs[d.Topic]; ok {
				e.synonyms = append(e.synonyms, configSynonym{d.Topic, dv, config.FromDynamicBroker})
			}
			if b.Broker.SourceOf(d.Topic) != config.SourceDefault {
				e.synonyms = append(e.synonyms, configSynonym{d.Topic, b.Broker.Get(d.Topic), config.FromStaticBroker})
			}
			bd, _ := config.LookupBroker(d.Topic)
			e.synonyms = append(e.synonyms, configSynonym{d.Topic, bd.DefaultIn(cl), config.FromDefault})
		}
		out = append(out, e)
	}
	return out
}

// brokerConfigEntries returns every broker setting's effective value;
// the built-in defaults are those of this cluster (its nodes).
func (b *Broker) brokerConfigEntries(im *metadata.Image) []configEntry {
	cl := config.Cluster{Nodes: im.Nodes()}
	var out []configEntry
	for _, d := range config.BrokerDefs() {
		v, src := b.Broker.ResolveBrokerIn(d.Name, im.BrokerConfigs, cl)
		e := configEntry{name: d.Name, value: v, source: src, readOnly: !d.Dynamic, kind: d.Kind, doc: d.Doc, sensitive: config.IsSensitive(d.Name)}
		if dv, ok := im.BrokerConfigs[d.Name]; ok {
			e.synonyms = append(e.synonyms, configSynonym{d.Name, dv, config.FromDynamicBroker})
		}
		if b.Broker.SourceOf(d.Name) != config.SourceDefault {
			e.synonyms = append(e.synonyms, configSynonym{d.Name, b.Broker.Get(d.Name), config.FromStaticBroker})
		}
		e.synonyms = append(e.synonyms, configSynonym{d.Name, d.DefaultIn(cl), config.FromDefault})
		out = append(out, e)
	}
	return out
}

func kafkaConfigType(k config.Kind) kmsg.ConfigType {
	switch k {
	case config.KindBool:
		return kmsg.ConfigTypeBoolean
	case config.KindInt:
		return kmsg.ConfigTypeInt
	case config.KindLong:
		return kmsg.ConfigTypeLong
	case config.KindList:
		return kmsg.ConfigTypeList
	case config.KindDouble:
		return kmsg.ConfigTypeDouble
	}
	return kmsg.ConfigTypeString
}

// checkBrokerResource accepts "" (cluster-wide default) or this node's id.
func (b *Broker) checkBrokerResource(name string) error {
	if name == "" || name == strconv.Itoa(int(b.NodeID)) {
		return nil
	}
	return fmt.Errorf("%w: broker %q is not this node (%d); send broker config requests to the broker itself or use \"\" for the cluster default", kerr.InvalidRequest, name, b.NodeID)
}

// checkBrokerChange validates dynamic broker settings.
func checkBrokerChange(set map[string]string, del []string) error {
	for _, k := range append(sortedKeys(set), del...) {
		d, ok := config.LookupBroker(k)
		if !ok {
			return fmt.Errorf("%w: unknown broker config %q", kerr.InvalidConfig, k)
		}
		if !d.Dynamic {
			return fmt.Errorf("%w: %s cannot be changed at run time; set it in the config file, environment or flags and restart", kerr.InvalidRequest, k)
		}
		if v, isSet := set[k]; isSet {
			if err := d.CheckValue(v); err != nil {
				return fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
			}
		}
	}
	return nil
}

// listOp applies an APPEND or SUBTRACT to a comma-separated list value.
func listOp(cur, arg string, add bool) string {
	var items []string
	for _, s := range strings.Split(cur, ",") {
		if s = strings.TrimSpace(s); s != "" {
			items = append(items, s)
		}
	}
	for _, a := range strings.Split(arg, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		idx := -1
		for i, s := range items {
			if s == a {
				idx = i
				break
			}
		}
		if add && idx < 0 {
			items = append(items, a)
		} else if !add && idx >= 0 {
			items = append(items[:idx], items[idx+1:]...)
		}
	}
	return strings.Join(items, ",")
}

// groupConfigEntries returns every group config's effective value for
// group's overrides (nil: none), with the broker setting each falls back
// to as a synonym, as Kafka describes the GROUP resource.
func (b *Broker) groupConfigEntries(im *metadata.Image, overrides map[string]string) []configEntry {
	return b.layeredConfigEntries(im, config.GroupDefs(), b.Broker.ResolveGroup, overrides, config.FromGroup, config.Cluster{})
}

// checkGroupResource checks the name of a GROUP config resource.
func checkGroupResource(name string) error {
	if name == "" {
		return fmt.Errorf("%w: a GROUP config resource needs the group id as its name", kerr.InvalidRequest)
	}
	return nil
}

// checkGroupConfigs validates a group's configs as they would be after a
// change (INVALID_CONFIG with what to do otherwise).
func (b *Broker) checkGroupConfigs(im *metadata.Image, merged map[string]string) error {
	if err := sharepart.CheckGroupConfigs(b.Broker, merged, im.BrokerConfigs); err != nil {
		return fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
	}
	if v := merged[share.ConfigAutoOffsetReset]; strings.HasPrefix(v, "by_duration:") {
		if _, err := sharepart.ParseISODuration(strings.TrimPrefix(v, "by_duration:")); err != nil {
			return fmt.Errorf("%w: %s: %v", kerr.InvalidConfig, share.ConfigAutoOffsetReset, err)
		}
	}
	if t := merged[berthmsg.ConfigDLQTopicName]; t != "" {
		if err := validTopicName(t); err != nil {
			return fmt.Errorf("%w: %s: %v", kerr.InvalidConfig, berthmsg.ConfigDLQTopicName, err)
		}
		if metadata.IsInternalTopic(t) || strings.HasPrefix(t, "__") {
			return fmt.Errorf("%w: %s %q is an internal topic; name a topic of your own", kerr.InvalidConfig, berthmsg.ConfigDLQTopicName, t)
		}
	}
	return nil
}

// mergedGroupConfigs returns cur with set applied and del removed (a new
// map), or exactly set when replace.
func mergedGroupConfigs(cur, set map[string]string, del []string, replace bool) map[string]string {
	out := map[string]string{}
	if !replace {
		for k, v := range cur {
			out[k] = v
		}
	}
	for k, v := range set {
		out[k] = v
	}
	for _, k := range del {
		delete(out, k)
	}
	return out
}

// dropGroupConfigs deletes the configs of the groups DeleteGroups deleted
// (Kafka's behaviour), before the answer goes out. A failure is logged:
// the group is gone either way, and its configs can still be deleted
// with IncrementalAlterConfigs.
func (b *Broker) dropGroupConfigs(resp *kmsg.DeleteGroupsResponse) {
	im := b.image()
	var recs []metadata.Record
	for _, g := range resp.Groups {
		if g.ErrorCode == 0 && im.GroupConfig(g.Group) != nil {
			recs = append(recs, metadata.Record{SetGroupConfigs: &metadata.SetGroupConfigs{Group: g.Group, Replace: true}})
		}
	}
	if len(recs) == 0 {
		return
	}
	if err := b.propose(context.Background(), recs...); err != nil {
		b.log.Warn("deleted groups keep their configs; delete them with IncrementalAlterConfigs", "err", err)
		return
	}
	for _, r := range recs {
		b.log.Info("group configs deleted with the group", "group", r.SetGroupConfigs.Group)
	}
}
