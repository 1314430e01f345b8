package handler

// DescribeConfigs, versions 0-4, for TOPIC, BROKER and GROUP resources,
// with synonyms (v1+) and documentation and types (v3+). A GROUP resource
// lists every group config (docs/configuration.md), unset ones with the
// broker setting or built-in default they fall back to, for any group id
// (Kafka's behaviour: configs may be set before the group exists).
// BROKER_LOGGER and CLIENT_METRICS resources get INVALID_REQUEST.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(32, 0, 4, (*Broker).describeConfigs) }

func (b *Broker) describeConfigs(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DescribeConfigsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	im := b.image()
	for _, rr := range r.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		if err := b.configDenied(req, opDescribeConfigs, rr.ResourceType, rr.ResourceName); err != nil {
			res.ErrorCode = code(err)
			resp.Resources = append(resp.Resources, res)
			continue
		}
		var entries []configEntry
		var err error
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if t := im.Topic(rr.ResourceName); t == nil {
				err = fmt.Errorf("%w: no topic %q", kerr.UnknownTopicOrPartition, rr.ResourceName)
			} else {
				entries = b.topicConfigEntries(im, t.Configs, t.ReplicationFactor())
			}
		case kmsg.ConfigResourceTypeBroker:
			if err = b.checkBrokerResource(rr.ResourceName); err == nil {
				entries = b.brokerConfigEntries(im)
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			if err = checkGroupResource(rr.ResourceName); err == nil {
				entries = b.groupConfigEntries(im, im.GroupConfig(rr.ResourceName))
			}
		default:
			err = fmt.Errorf("%w: resource type %v is not served", kerr.InvalidRequest, rr.ResourceType)
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = code(err), errMsg(err)
			resp.Resources = append(resp.Resources, res)
			continue
		}
		want := map[string]bool{}
		for _, n := range rr.ConfigNames {
			want[n] = true
		}
		for _, e := range entries {
			if len(want) > 0 && !want[e.name] {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			v := e.value
			c.Name, c.Value, c.ReadOnly = e.name, &v, e.readOnly
			c.IsDefault = e.source == config.FromDefault
			c.Source = kmsg.ConfigSource(e.source)
			c.ConfigType = kafkaConfigType(e.kind)
			if r.IncludeDocumentation {
				doc := e.doc
				c.Documentation = &doc
			}
			if r.IncludeSynonyms {
				for _, s := range e.synonyms {
					sy := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					sv := s.value
					sy.Name, sy.Value, sy.Source = s.name, &sv, kmsg.ConfigSource(s.source)
					if e.sensitive {
						sy.Value = nil
					}
					c.ConfigSynonyms = append(c.ConfigSynonyms, sy)
				}
			}
			if e.sensitive { // as Kafka: no value, flagged sensitive
				c.Value, c.IsSensitive, c.ConfigType = nil, true, kmsg.ConfigTypePassword
			}
			res.Configs = append(res.Configs, c)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return now(resp), nil
}
