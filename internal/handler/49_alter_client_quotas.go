package handler

// AlterClientQuotas, versions 0-1: sets and removes client quota values
// in the metadata log, with Kafka's checks per entry: entity types user,
// client-id and ip, each at most once, ip alone and a valid address;
// keys known for the entity (ip: connection_creation_rate; user and
// client-id: Kafka's producer_byte_rate, consumer_byte_rate,
// request_percentage, controller_mutation_rate and Berth's
// producer_record_rate, max_record_bytes and violation_action), each once;
// values positive (whole numbers for byte counts and rates Kafka keeps as
// longs; violation_action 0 = throttle or 1 = reject). A failed check is
// INVALID_REQUEST for that entry. validate_only checks and writes
// nothing. Needs ALTER_CONFIGS on CLUSTER.

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(49, 0, 1, (*Broker).alterClientQuotas) }

func (b *Broker) alterClientQuotas(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.AlterClientQuotasRequest)
	resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	allowed := b.authorized(req, kmsg.ACLOperationAlterConfigs, kmsg.ACLResourceTypeCluster, "kafka-cluster")
	var recs []metadata.Record
	var recEntry []int // resp.Entries index of each record
	for _, e := range r.Entries {
		out := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range e.Entity {
			oe := kmsg.NewAlterClientQuotasResponseEntryEntity()
			oe.Type, oe.Name = p.Type, p.Name
			out.Entity = append(out.Entity, oe)
		}
		var rec *metadata.SetClientQuotas
		err := error(nil)
		if !allowed {
			err = fmt.Errorf("%w: ALTER_CONFIGS on the cluster is needed to alter client quotas", kerr.ClusterAuthorizationFailed)
		} else {
			rec, err = checkQuotaEntry(e)
		}
		if err != nil {
			out.ErrorCode, out.ErrorMessage = code(err), errMsg(err)
		} else if !r.ValidateOnly && (len(rec.Set) > 0 || len(rec.Delete) > 0) {
			recs = append(recs, metadata.Record{SetClientQuotas: rec})
			recEntry = append(recEntry, len(resp.Entries))
		}
		resp.Entries = append(resp.Entries, out)
	}
	if len(recs) > 0 {
		if err := b.propose(ctx, recs...); err != nil {
			for _, i := range recEntry {
				resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = code(err), errMsg(err)
			}
		} else {
			b.log.Info("client quotas altered", "principal", req.Conn.Principal().String(), "entities", len(recs))
		}
	}
	if !r.ValidateOnly {
		b.auditQuotas(req, r, resp)
	}
	return now(resp), nil
}

// auditQuotas gives the audit trail one management event per entry.
func (b *Broker) auditQuotas(req *server.Request, r *kmsg.AlterClientQuotasRequest, resp *kmsg.AlterClientQuotasResponse) {
	for i, e := range r.Entries {
		var ent []string
		for _, p := range e.Entity {
			n := "<default>"
			if p.Name != nil {
				n = *p.Name
			}
			ent = append(ent, p.Type+"="+n)
		}
		detail := map[string]string{}
		for _, op := range e.Ops {
			if op.Remove {
				detail[op.Key] = "(removed)"
			} else {
				detail[op.Key] = strconv.FormatFloat(op.Value, 'f', -1, 64)
			}
		}
		ev := auth.Event{Time: time.Now(), Principal: req.Conn.Principal(),
			Kind: "management", Method: "AlterClientQuotas", Operation: "ALTER_CONFIGS",
			ResourceType: "CLIENT_QUOTA", ResourceName: strings.Join(ent, ","), Allowed: true, Detail: detail}
		if req.Conn != nil {
			ev.Host, ev.Listener = req.Conn.Remote, req.Conn.Listener
		}
		if c := resp.Entries[i].ErrorCode; c != 0 {
			ev.Error = kerr.ErrorForCode(c).Error()
			ev.Allowed = c != kerr.ClusterAuthorizationFailed.Code
		}
		b.Auditor.Audit(ev)
	}
}

// checkQuotaEntry checks one AlterClientQuotas entry and makes its record.
func checkQuotaEntry(e kmsg.AlterClientQuotasRequestEntry) (*metadata.SetClientQuotas, error) {
	parts := make([]metadata.QuotaEntityPart, len(e.Entity))
	for i, p := range e.Entity {
		parts[i] = metadata.QuotaEntityPart{Type: p.Type, Name: p.Name}
	}
	ent, err := metadata.ParseQuotaEntity(parts)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", kerr.InvalidRequest, err)
	}
	ip := ent.IP.Set
	if ip && !ent.IP.Default {
		a, err := netip.ParseAddr(ent.IP.Name)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%w: %q is not an IP address", kerr.InvalidRequest, ent.IP.Name)
		}
		// Stored in the form connections are looked up by (::ffff:a.b.c.d
		// is a.b.c.d, IPv6 in its shortest form).
		ent.IP.Name = a.Unmap().String()
	}
	rec := &metadata.SetClientQuotas{Entity: ent.Parts(), Set: map[string]float64{}}
	seen := map[string]bool{}
	for _, op := range e.Ops {
		if seen[op.Key] {
			return nil, fmt.Errorf("%w: quota key %q given twice", kerr.InvalidRequest, op.Key)
		}
		seen[op.Key] = true
		if !auth.QuotaKeyValid(op.Key, ip) {
			if ip {
				return nil, fmt.Errorf("%w: %q is not a quota of ip entities (connection_creation_rate only)", kerr.InvalidRequest, op.Key)
			}
			return nil, fmt.Errorf("%w: unknown quota key %q", kerr.InvalidRequest, op.Key)
		}
		if op.Remove {
			rec.Delete = append(rec.Delete, op.Key)
			continue
		}
		if !auth.QuotaValueValid(op.Key, op.Value) {
			if op.Key == auth.QuotaViolationAction {
				return nil, fmt.Errorf("%w: violation_action must be 0 (throttle) or 1 (reject), not %v", kerr.InvalidRequest, op.Value)
			}
			return nil, fmt.Errorf("%w: quota %s = %v: must be positive (and whole for byte counts)", kerr.InvalidRequest, op.Key, op.Value)
		}
		rec.Set[op.Key] = op.Value
	}
	return rec, nil
}
