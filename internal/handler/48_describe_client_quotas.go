package handler

// DescribeClientQuotas, versions 0-1: the client quotas of the metadata
// image matching a filter, with Kafka's semantics: each component names an
// entity type (user, client-id, ip) at most once and matches it EXACT (a
// name, or the default entity when the name is null), DEFAULT or ANY
// (named or default); strict asks for entities with exactly the filter's
// types. An ip component with a user or client-id one, a type twice or an
// unknown type is INVALID_REQUEST. Needs DESCRIBE_CONFIGS on CLUSTER.

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(48, 0, 1, (*Broker).describeClientQuotas) }

func (b *Broker) describeClientQuotas(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DescribeClientQuotasRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(e *kerr.Error, msg string) (server.Reply, error) {
		resp.ErrorCode, resp.ErrorMessage = e.Code, &msg
		return now(resp), nil
	}
	if !b.authorized(req, kmsg.ACLOperationDescribeConfigs, kmsg.ACLResourceTypeCluster, "kafka-cluster") {
		return fail(kerr.ClusterAuthorizationFailed, "DESCRIBE_CONFIGS on the cluster is needed to describe client quotas")
	}
	type comp struct {
		any  bool
		name metadata.QuotaName
	}
	filter := map[string]comp{}
	for _, c := range r.Components {
		switch c.EntityType {
		case metadata.QuotaUser, metadata.QuotaClientID, metadata.QuotaIP:
		default:
			return fail(kerr.InvalidRequest, fmt.Sprintf("unknown quota entity type %q (user, client-id, ip)", c.EntityType))
		}
		if _, dup := filter[c.EntityType]; dup {
			return fail(kerr.InvalidRequest, fmt.Sprintf("entity type %q appears more than once in the filter", c.EntityType))
		}
		switch {
		case c.MatchType == 2: // ANY
			filter[c.EntityType] = comp{any: true}
		case c.MatchType == 1 || c.MatchType == 0 && c.Match == nil: // DEFAULT, or EXACT of the default
			filter[c.EntityType] = comp{name: metadata.DefaultQuotaName}
		case c.MatchType == 0:
			filter[c.EntityType] = comp{name: metadata.Exact(*c.Match)}
		default:
			return fail(kerr.InvalidRequest, fmt.Sprintf("unknown match type %d", c.MatchType))
		}
	}
	_, ip := filter[metadata.QuotaIP]
	_, user := filter[metadata.QuotaUser]
	_, client := filter[metadata.QuotaClientID]
	if ip && (user || client) {
		return fail(kerr.InvalidRequest, "an ip filter component cannot be combined with user or client-id components")
	}
	im := b.image()
	for e, vals := range im.ClientQuotas {
		parts := map[string]metadata.QuotaName{}
		for _, p := range e.Parts() {
			if p.Name == nil {
				parts[p.Type] = metadata.DefaultQuotaName
			} else {
				parts[p.Type] = metadata.Exact(*p.Name)
			}
		}
		if r.Strict && len(parts) != len(filter) {
			continue
		}
		ok := true
		for typ, c := range filter {
			n, has := parts[typ]
			if !has || !c.any && n != c.name {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		ent := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range e.Parts() {
			pe := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			pe.Type, pe.Name = p.Type, p.Name
			ent.Entity = append(ent.Entity, pe)
		}
		for k, v := range vals {
			pv := kmsg.NewDescribeClientQuotasResponseEntryValue()
			pv.Key, pv.Value = k, v
			ent.Values = append(ent.Values, pv)
		}
		sort.Slice(ent.Values, func(i, j int) bool { return ent.Values[i].Key < ent.Values[j].Key })
		resp.Entries = append(resp.Entries, ent)
	}
	sort.Slice(resp.Entries, func(i, j int) bool {
		return entityString(resp.Entries[i].Entity) < entityString(resp.Entries[j].Entity)
	})
	return now(resp), nil
}

func entityString(es []kmsg.DescribeClientQuotasResponseEntryEntity) string {
	s := ""
	for _, e := range es {
		n := "\x00"
		if e.Name != nil {
			n = *e.Name
		}
		s += e.Type + "=" + n + ";"
	}
	return s
}
