package handler

// IncrementalAlterConfigs, versions 0-1: SET, DELETE, APPEND and SUBTRACT
// (list settings) on TOPIC, BROKER and GROUP resources; validate-only
// honoured. Group configs are checked as a whole after the change (the
// broker's bounds, the dead-letter topic prefix, the backoff's initial
// below its max) and apply to share-partitions loaded after it.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(44, 0, 1, (*Broker).incrementalAlterConfigs) }

func (b *Broker) incrementalAlterConfigs(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range r.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		err := b.configDenied(req, opAlterConfigs, rr.ResourceType, rr.ResourceName)
		if err == nil {
			err = b.incrementalAlter(ctx, rr, r.ValidateOnly)
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = code(err), errMsg(err)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return now(resp), nil
}

func (b *Broker) incrementalAlter(ctx context.Context, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	im := b.image()
	var current map[string]string
	var resolve func(string) string
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		t := im.Topic(rr.ResourceName)
		if t == nil {
			return fmt.Errorf("%w: no topic %q", kerr.UnknownTopicOrPartition, rr.ResourceName)
		}
		current = t.Configs
		cl := config.Cluster{Nodes: im.Nodes(), ReplicationFactor: t.ReplicationFactor()}
		resolve = func(n string) string { v, _ := b.Broker.ResolveTopic(n, t.Configs, im.BrokerConfigs, cl); return v }
	case kmsg.ConfigResourceTypeBroker:
		if err := b.checkBrokerResource(rr.ResourceName); err != nil {
			return err
		}
		current = im.BrokerConfigs
		resolve = func(n string) string { v, _ := b.Broker.ResolveBroker(n, im.BrokerConfigs); return v }
	case kmsg.ConfigResourceTypeGroupConfig:
		if err := checkGroupResource(rr.ResourceName); err != nil {
			return err
		}
		current = im.GroupConfig(rr.ResourceName)
		resolve = func(n string) string {
			v, _ := b.Broker.ResolveGroup(n, current, im.BrokerConfigs)
			return v
		}
	default:
		return fmt.Errorf("%w: resource type %v is not served", kerr.InvalidRequest, rr.ResourceType)
	}
	set := map[string]string{}
	var del []string
	seen := map[string]bool{}
	for _, c := range rr.Configs {
		if seen[c.Name] {
			return fmt.Errorf("%w: config %q given twice", kerr.InvalidRequest, c.Name)
		}
		seen[c.Name] = true
		val := ""
		if c.Value != nil {
			val = *c.Value
		}
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			set[c.Name] = val
		case kmsg.IncrementalAlterConfigOpDelete:
			del = append(del, c.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			var kind config.Kind
			if rr.ResourceType == kmsg.ConfigResourceTypeTopic {
				d, _ := config.LookupTopic(c.Name)
				kind = d.Kind
			} else if rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig {
				d, _ := config.LookupGroup(c.Name)
				kind = d.Kind
			} else {
				d, _ := config.LookupBroker(c.Name)
				kind = d.Kind
			}
			if kind != config.KindList {
				return fmt.Errorf("%w: %s is not a list; APPEND and SUBTRACT apply to lists only", kerr.InvalidConfig, c.Name)
			}
			cur, ok := current[c.Name]
			if !ok {
				cur = resolve(c.Name)
			}
			set[c.Name] = listOp(cur, val, c.Op == kmsg.IncrementalAlterConfigOpAppend)
		default:
			return fmt.Errorf("%w: unknown operation %d", kerr.InvalidRequest, c.Op)
		}
	}
	var rec metadata.Record
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeGroupConfig:
		for _, k := range del {
			if _, ok := config.LookupGroup(k); !ok {
				return fmt.Errorf("%w: unknown group config %q", kerr.InvalidConfig, k)
			}
		}
		if err := b.checkGroupConfigs(im, mergedGroupConfigs(current, set, del, false)); err != nil {
			return err
		}
		rec.SetGroupConfigs = &metadata.SetGroupConfigs{Group: rr.ResourceName, Set: set, Delete: del}
	case kmsg.ConfigResourceTypeTopic:
		for _, k := range del {
			if _, ok := config.LookupTopic(k); !ok {
				return fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, k)
			}
		}
		if err := checkTopicConfigs(set); err != nil {
			return err
		}
		rec.SetTopicConfigs = &metadata.SetTopicConfigs{Name: rr.ResourceName, Set: set, Delete: del}
	default:
		if err := checkBrokerChange(set, del); err != nil {
			return err
		}
		rec.SetBrokerConfigs = &metadata.SetBrokerConfigs{Set: set, Delete: del}
	}
	if validateOnly {
		return nil
	}
	if err := b.propose(ctx, rec); err != nil {
		return err
	}
	b.log.Info("configs changed", "resource", rr.ResourceName, "type", rr.ResourceType, "set", set, "deleted", del)
	return nil
}
