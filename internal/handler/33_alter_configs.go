package handler

// AlterConfigs, versions 0-2: replaces all dynamic settings of a TOPIC,
// BROKER ("" or this node's id: Berth keeps one cluster-wide set of
// dynamic broker settings) or GROUP resource. Validate-only is honoured.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(33, 0, 2, (*Broker).alterConfigs) }

func (b *Broker) alterConfigs(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.AlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range r.Resources {
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		if err := b.configDenied(req, opAlterConfigs, rr.ResourceType, rr.ResourceName); err != nil {
			res.ErrorCode = code(err)
			resp.Resources = append(resp.Resources, res)
			continue
		}
		set := map[string]string{}
		for _, c := range rr.Configs {
			if c.Value != nil {
				set[c.Name] = *c.Value
			}
		}
		var rec metadata.Record
		var err error
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if b.image().Topic(rr.ResourceName) == nil {
				err = fmt.Errorf("%w: no topic %q", kerr.UnknownTopicOrPartition, rr.ResourceName)
			} else if err = checkTopicConfigs(set); err == nil {
				rec.SetTopicConfigs = &metadata.SetTopicConfigs{Name: rr.ResourceName, Set: set, Replace: true}
			}
		case kmsg.ConfigResourceTypeBroker:
			if err = b.checkBrokerResource(rr.ResourceName); err == nil {
				if err = checkBrokerChange(set, nil); err == nil {
					rec.SetBrokerConfigs = &metadata.SetBrokerConfigs{Set: set, Replace: true}
				}
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			if err = checkGroupResource(rr.ResourceName); err == nil {
				if err = b.checkGroupConfigs(b.image(), set); err == nil {
					rec.SetGroupConfigs = &metadata.SetGroupConfigs{Group: rr.ResourceName, Set: set, Replace: true}
				}
			}
		default:
			err = fmt.Errorf("%w: resource type %v is not served", kerr.InvalidRequest, rr.ResourceType)
		}
		if err == nil && !r.ValidateOnly {
			err = b.propose(ctx, rec)
			if err == nil {
				b.log.Info("configs replaced", "resource", rr.ResourceName, "type", rr.ResourceType, "configs", set)
			}
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = code(err), errMsg(err)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return now(resp), nil
}
