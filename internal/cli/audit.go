package cli

// `berth audit search`: the audit trail (__berth_audit, CloudEvents JSON
// written by internal/audit) read with a Kafka client and filtered by
// principal, resource, time, operation, outcome and kind. The read seeks
// each partition to --since with ListOffsets by timestamp and scans to the
// end offsets (the topic is keyed by principal, so a principal's events
// are in one partition, but scanning them all is simple and cheap enough).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/audit"
)

func init() { clientCommands = append(clientCommands, newAuditCmd) }

func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Search the audit trail (" + audit.Topic + "): who authenticated, was refused, read, wrote or changed what, and when",
		Args:  cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newAuditSearchCmd(cf))
	return cmd
}

// auditSearchFlags are the filters as given on the command line.
type auditSearchFlags struct {
	principal, resource, since, until, operation, kind string
	denied, allowed                                    bool
	limit                                              int
}

// auditFilter is a parsed search.
type auditFilter struct {
	principal    string // Type:Name; "" any
	resType      string // normalized (topic, group, cluster, transactionalid, ...); "" any
	resName      string // "" any
	resPrefix    bool   // resName ends with * on the command line
	since, until time.Time
	operation    string // normalized
	kind         string // authentication, authorization, management, or a CloudEvents type
	denied       bool
	allowed      bool
}

func newAuditSearchCmd(cf *clientFlags) *cobra.Command {
	var f auditSearchFlags
	cmd := &cobra.Command{
		Use:   "search",
		Short: "Find audit events by principal, resource, time, operation and outcome",
		Long: `Reads ` + audit.Topic + ` and prints the matching events, oldest first: the newest
--limit of them. Times are dates (2026-11-24, local midnight), date-times
(2026-11-24T10:00:00, RFC 3339 with a zone), or durations ago (24h, 7d).
Reads and writes of topics are recorded as aggregated allows: one event per
principal, client, topic and operation per interval, with a count.`,
		Example: `  # who read the orders topic last Tuesday
  berth audit search --resource topic:orders --operation read --since 2026-11-24 --until 2026-11-25
  # failed logins of a user
  berth audit search --principal User:alice --type authentication --denied
  # ACL changes this week
  berth audit search --type management --operation alter --since 7d --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			flt, err := parseAuditFilter(f, time.Now())
			if err != nil {
				return err
			}
			if f.limit < 1 {
				return fmt.Errorf("--limit %d: must be at least 1", f.limit)
			}
			return withClients(cmd, cf, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
				evs, err := searchAudit(ctx, cf, adm, flt, f.limit)
				if err != nil {
					return err
				}
				return printAudit(cmd.OutOrStdout(), evs, cf.json)
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.principal, "principal", "", "only events of this principal (User:alice; a bare name means User:name)")
	fs.StringVar(&f.resource, "resource", "", "only events on this resource: topic:NAME, group:NAME, transactional-id:NAME, user:NAME, cluster (a trailing * matches a prefix)")
	fs.StringVar(&f.since, "since", "", "only events at or after this time (2026-11-24, 2026-11-24T10:00:00Z, or a duration ago: 24h, 7d)")
	fs.StringVar(&f.until, "until", "", "only events before this time (same forms as --since)")
	fs.StringVar(&f.operation, "operation", "", "only this operation (read, write, create, delete, alter, alter_configs, ...) or API (CreateTopics)")
	fs.StringVar(&f.kind, "type", "", "only events of this kind: authentication, authorization or management (or a full CloudEvents type, io.berth.dlq.purge)")
	fs.BoolVar(&f.denied, "denied", false, "only refusals: authorization denials and failed authentications")
	fs.BoolVar(&f.allowed, "allowed", false, "only events that were not refusals")
	fs.IntVar(&f.limit, "limit", 100, "print at most this many events (the newest)")
	return cmd
}

// parseAuditFilter checks and parses the search flags.
func parseAuditFilter(f auditSearchFlags, now time.Time) (auditFilter, error) {
	var flt auditFilter
	if f.denied && f.allowed {
		return flt, errors.New("--denied and --allowed exclude each other: give one")
	}
	flt.denied, flt.allowed = f.denied, f.allowed
	if p := strings.TrimSpace(f.principal); p != "" {
		if !strings.Contains(p, ":") {
			p = "User:" + p
		}
		flt.principal = p
	}
	if r := strings.TrimSpace(f.resource); r != "" {
		typ, name, _ := strings.Cut(r, ":")
		flt.resType = audit.Normalize(typ)
		switch flt.resType {
		case "cluster":
			name = ""
		case "topic", "group", "transactionalid", "user", "clientquota", "broker", "delegationtoken":
			if name == "" {
				return flt, fmt.Errorf("--resource %q: give a name after the colon, e.g. %s:orders", r, typ)
			}
		default:
			return flt, fmt.Errorf("--resource %q: want topic:NAME, group:NAME, transactional-id:NAME, user:NAME or cluster", r)
		}
		if strings.HasSuffix(name, "*") {
			flt.resPrefix, name = true, strings.TrimSuffix(name, "*")
		}
		flt.resName = name
	}
	var err error
	if f.since != "" {
		if flt.since, err = parseAuditTime("--since", f.since, now); err != nil {
			return flt, err
		}
	}
	if f.until != "" {
		if flt.until, err = parseAuditTime("--until", f.until, now); err != nil {
			return flt, err
		}
	}
	if !flt.since.IsZero() && !flt.until.IsZero() && !flt.until.After(flt.since) {
		return flt, fmt.Errorf("--until %s is not after --since %s", f.until, f.since)
	}
	flt.operation = audit.Normalize(strings.TrimSpace(f.operation))
	if k := strings.TrimSpace(f.kind); k != "" {
		switch k = strings.ToLower(k); k {
		case audit.KindAuthentication, audit.KindAuthorization, audit.KindManagement:
		default:
			if !strings.Contains(k, ".") {
				return flt, fmt.Errorf("--type %q: want authentication, authorization or management (or a CloudEvents type such as io.berth.dlq.purge)", f.kind)
			}
		}
		flt.kind = k
	}
	return flt, nil
}

// parseAuditTime reads a date (local midnight), a date-time, RFC 3339, or
// a duration ago (with d for days).
func parseAuditTime(flag, s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, "d") {
		if n, err := strconv.Atoi(strings.TrimSuffix(s, "d")); err == nil {
			if n < 0 {
				return time.Time{}, fmt.Errorf("%s %q: a duration means that long ago and must not be negative", flag, s)
			}
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%s %q: a duration means that long ago and must not be negative", flag, s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := parseResetDatetime(s, time.Local); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%s %q: want a date (2026-11-24), a date-time (2026-11-24T10:00:00, RFC 3339 with a zone) or a duration ago (24h, 7d)", flag, s)
}

// denied reports a refusal: an authorization denial or a failed
// authentication.
func auditDenied(ce audit.CloudEvent) bool {
	if a := ce.Data.AuthorizationInfo; a != nil && !a.Granted {
		return true
	}
	return ce.Data.Kind == audit.KindAuthentication && ce.Data.Result.Status == audit.StatusFailure
}

// match reports whether ce passes the filter.
func (f auditFilter) match(ce audit.CloudEvent) bool {
	if f.principal != "" && ce.Data.AuthenticationInfo.Principal != f.principal {
		return false
	}
	start, end := ce.Time, ce.Time
	if a := ce.Data.Aggregation; a != nil {
		start, end = a.Start, a.End
	}
	if !f.since.IsZero() && end.Before(f.since) {
		return false
	}
	if !f.until.IsZero() && !start.Before(f.until) {
		return false
	}
	if f.resType != "" {
		a := ce.Data.AuthorizationInfo
		if a == nil {
			return false
		}
		if audit.Normalize(a.ResourceType) != f.resType {
			return false
		}
		if f.resName != "" && !(a.ResourceName == f.resName || f.resPrefix && strings.HasPrefix(a.ResourceName, f.resName)) {
			return false
		}
	}
	if f.operation != "" {
		op := ""
		if a := ce.Data.AuthorizationInfo; a != nil {
			op = audit.Normalize(a.Operation)
		}
		if op != f.operation && audit.Normalize(strings.TrimPrefix(ce.Data.MethodName, "kafka.")) != f.operation {
			return false
		}
	}
	if f.kind != "" && ce.Data.Kind != f.kind && ce.Type != f.kind {
		return false
	}
	if f.denied && !auditDenied(ce) || f.allowed && auditDenied(ce) {
		return false
	}
	return true
}

// auditHit is a matching event with its stored bytes.
type auditHit struct {
	ev  audit.CloudEvent
	raw []byte
}

// searchAudit reads the audit topic from --since to its end and returns
// the newest limit matches, oldest first.
func searchAudit(ctx context.Context, cf *clientFlags, adm *kadm.Client, f auditFilter, limit int) ([]auditHit, error) {
	rng, err := topicBounds(ctx, adm, audit.Topic)
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, fmt.Errorf("%s does not exist: the audit trail is off or has recorded nothing yet "+
			"(turn it on with the broker setting audit.log.enable=true; docs/security.md, Audit trail)", audit.Topic)
	}
	if err != nil {
		return nil, cf.explain(err)
	}
	if !f.since.IsZero() {
		// Aggregated events are stamped with the end of their interval,
		// so seeking to --since misses none that overlap it.
		offs, err := adm.ListOffsetsAfterMilli(ctx, f.since.UnixMilli(), audit.Topic)
		if err == nil {
			err = offs.Error()
		}
		if err != nil {
			return nil, cf.explain(err)
		}
		offs.Each(func(o kadm.ListedOffset) {
			if r, ok := rng[o.Partition]; ok && o.Offset > r[0] {
				r[0] = min(o.Offset, r[1])
				rng[o.Partition] = r
			}
		})
	}
	var hits []auditHit
	err = scanRange(ctx, cf, audit.Topic, rng, cf.timeout, func(r *kgo.Record) bool {
		ce, err := audit.Decode(r.Value)
		if err != nil || !f.match(ce) {
			return true
		}
		hits = append(hits, auditHit{ce, r.Value})
		return true
	})
	if err != nil {
		return nil, cf.explain(err)
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].ev.Time.Before(hits[j].ev.Time) })
	if len(hits) > limit {
		hits = hits[len(hits)-limit:]
	}
	return hits, nil
}

// printAudit writes the events as a table, or with --json each stored
// CloudEvent on its own line.
func printAudit(w io.Writer, hits []auditHit, asJSON bool) error {
	if asJSON {
		for _, h := range hits {
			if _, err := fmt.Fprintf(w, "%s\n", h.raw); err != nil {
				return err
			}
		}
		return nil
	}
	t := newTable(w, "time", "principal", "client", "operation", "resource", "result")
	for _, h := range hits {
		d := h.ev.Data
		client := d.RequestMetadata.ClientID
		if a := d.RequestMetadata.ClientAddress; a != "" {
			client += "@" + a
		}
		op := strings.TrimPrefix(d.MethodName, "kafka.")
		res := "-"
		if a := d.AuthorizationInfo; a != nil {
			op += " " + a.Operation
			res = kebab(a.ResourceType)
			if res != "cluster" {
				res += ":" + a.ResourceName
			}
		}
		if d.Kind == audit.KindAuthentication && d.AuthenticationInfo.Mechanism != "" {
			op += " " + d.AuthenticationInfo.Mechanism
		}
		result := "ok"
		switch {
		case auditDenied(h.ev):
			result = "denied"
		case d.Result.Status == audit.StatusFailure:
			result = "failed"
		case d.AuthorizationInfo != nil && d.Kind == audit.KindAuthorization:
			result = "allowed"
		}
		if d.Result.Message != "" {
			result += " " + d.Result.Message
		}
		when := h.ev.Time.Local().Format(time.RFC3339)
		if a := d.Aggregation; a != nil {
			result += " x" + strconv.FormatInt(a.Count, 10)
			when = a.Start.Local().Format(time.RFC3339) + ".." + a.End.Local().Format("15:04:05")
		}
		t.row(when, d.AuthenticationInfo.Principal, dashIfEmpty(client), op, res, result)
	}
	return t.flush()
}

// kebab writes a resource type as --resource takes it: TransactionalId
// becomes transactional-id.
func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
