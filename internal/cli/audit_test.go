package cli

import (
	"testing"
	"time"

	"github.com/berthmq/berth/internal/audit"
)

func TestAuditFilterParse(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	tue := time.Date(2026, 11, 24, 0, 0, 0, 0, time.Local)
	for _, c := range []struct {
		name string
		in   auditSearchFlags
		want auditFilter
		err  bool
	}{
		{"principal", auditSearchFlags{principal: "User:alice"}, auditFilter{principal: "User:alice"}, false},
		{"bare principal", auditSearchFlags{principal: "alice"}, auditFilter{principal: "User:alice"}, false},
		{"topic", auditSearchFlags{resource: "topic:orders"}, auditFilter{resType: "topic", resName: "orders"}, false},
		{"topic prefix", auditSearchFlags{resource: "topic:ord*"}, auditFilter{resType: "topic", resName: "ord", resPrefix: true}, false},
		{"txn id", auditSearchFlags{resource: "transactional-id:tx1"}, auditFilter{resType: "transactionalid", resName: "tx1"}, false},
		{"group", auditSearchFlags{resource: "group:g"}, auditFilter{resType: "group", resName: "g"}, false},
		{"cluster", auditSearchFlags{resource: "cluster"}, auditFilter{resType: "cluster"}, false},
		{"no name", auditSearchFlags{resource: "topic:"}, auditFilter{}, true},
		{"unknown type", auditSearchFlags{resource: "table:x"}, auditFilter{}, true},
		{"date range", auditSearchFlags{since: "2026-11-24", until: "2026-11-25"}, auditFilter{since: tue, until: tue.AddDate(0, 0, 1)}, false},
		{"rfc3339", auditSearchFlags{since: "2026-11-24T10:00:00Z"}, auditFilter{since: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}, false},
		{"duration", auditSearchFlags{since: "24h"}, auditFilter{since: now.Add(-24 * time.Hour)}, false},
		{"days", auditSearchFlags{since: "7d"}, auditFilter{since: now.AddDate(0, 0, -7)}, false},
		{"negative", auditSearchFlags{since: "-1h"}, auditFilter{}, true},
		{"bad time", auditSearchFlags{since: "last tuesday"}, auditFilter{}, true},
		{"until before since", auditSearchFlags{since: "2026-11-25", until: "2026-11-24"}, auditFilter{}, true},
		{"operation", auditSearchFlags{operation: "ALTER_CONFIGS"}, auditFilter{operation: "alterconfigs"}, false},
		{"type", auditSearchFlags{kind: "Authentication"}, auditFilter{kind: "authentication"}, false},
		{"ce type", auditSearchFlags{kind: "io.berth.dlq.purge"}, auditFilter{kind: "io.berth.dlq.purge"}, false},
		{"bad type", auditSearchFlags{kind: "login"}, auditFilter{}, true},
		{"denied and allowed", auditSearchFlags{denied: true, allowed: true}, auditFilter{}, true},
	} {
		got, err := parseAuditFilter(c.in, now)
		if (err != nil) != c.err {
			t.Errorf("%s: err %v, want error %v", c.name, err, c.err)
			continue
		}
		if err == nil && (!got.since.Equal(c.want.since) || !got.until.Equal(c.want.until)) {
			t.Errorf("%s: since %v until %v, want %v %v", c.name, got.since, got.until, c.want.since, c.want.until)
		}
		got.since, got.until, c.want.since, c.want.until = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if err == nil && got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// An aggregated event matches a range its interval overlaps, and the
// resource and operation match whatever their spelling.
func TestAuditFilterMatch(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 23, 59, 30, 0, time.UTC)
	ce := audit.CloudEvent{Time: t0.Add(time.Minute), Type: "io.berth.kafka.authorization", Data: audit.Data{
		Kind: "authorization", MethodName: "kafka.Fetch", AuthenticationInfo: audit.AuthenticationInfo{Principal: "User:bob"},
		AuthorizationInfo: &audit.AuthorizationInfo{Granted: true, Operation: "Read", ResourceType: "Topic", ResourceName: "orders"},
		Aggregation:       &audit.Aggregation{Count: 3, Start: t0, End: t0.Add(time.Minute)},
	}}
	day := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		f    auditFilter
		want bool
	}{
		{auditFilter{since: day, until: day.AddDate(0, 0, 1), resType: "topic", resName: "orders", operation: "read"}, true},
		{auditFilter{since: day.AddDate(0, 0, 1)}, true}, // the interval runs past midnight
		{auditFilter{until: day}, false},
		{auditFilter{resType: "topic", resName: "ord", resPrefix: true}, true},
		{auditFilter{resType: "topic", resName: "ord"}, false},
		{auditFilter{resType: "group", resName: "orders"}, false},
		{auditFilter{operation: "fetch"}, true},
		{auditFilter{operation: "write"}, false},
		{auditFilter{principal: "User:alice"}, false},
		{auditFilter{denied: true}, false},
		{auditFilter{allowed: true}, true},
		{auditFilter{kind: "management"}, false},
		{auditFilter{kind: "io.berth.kafka.authorization"}, true},
	} {
		if got := c.f.match(ce); got != c.want {
			t.Errorf("%+v: match %v, want %v", c.f, got, c.want)
		}
	}
}

func TestAuditKebab(t *testing.T) {
	for in, want := range map[string]string{"TransactionalId": "transactional-id", "Topic": "topic", "ClientQuota": "client-quota", "Cluster": "cluster"} {
		if got := kebab(in); got != want {
			t.Errorf("kebab(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzAuditFilter(f *testing.F) {
	f.Add("User:alice", "topic:orders", "2026-11-24", "24h", "read", "authorization")
	f.Add("", "cluster", "7d", "2026-11-24T10:00:00Z", "ALTER_CONFIGS", "io.berth.dlq.purge")
	f.Add(":", "topic:*", "-1d", "d", "", "x")
	now := time.Now()
	f.Fuzz(func(t *testing.T, principal, resource, since, until, op, kind string) {
		flt, err := parseAuditFilter(auditSearchFlags{principal: principal, resource: resource, since: since, until: until, operation: op, kind: kind}, now)
		if err != nil {
			return
		}
		if !flt.since.IsZero() && !flt.until.IsZero() && !flt.until.After(flt.since) {
			t.Fatalf("accepted an empty range %v..%v", flt.since, flt.until)
		}
		_ = flt.match(audit.CloudEvent{})
	})
}
