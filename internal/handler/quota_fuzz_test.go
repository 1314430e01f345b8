package handler_test

import "github.com/twmb/franz-go/pkg/kmsg"

// quotaFuzzSeeds are DescribeClientQuotas and AlterClientQuotas requests
// for FuzzRequests: every match type, strict, defaults and names, valid
// and invalid keys, removals and validate-only.
func quotaFuzzSeeds() []kmsg.Request {
	name, ip := "alice", "127.0.0.2"
	d := kmsg.NewPtrDescribeClientQuotasRequest()
	d.Version, d.Strict = 1, true
	for i, typ := range []string{"user", "client-id"} {
		c := kmsg.NewDescribeClientQuotasRequestComponent()
		c.EntityType, c.MatchType = typ, kmsg.QuotasMatchType(i)
		if i == 0 {
			c.Match = &name
		}
		d.Components = append(d.Components, c)
	}
	a := kmsg.NewPtrAlterClientQuotasRequest()
	a.Version = 1
	for _, ent := range [][]kmsg.AlterClientQuotasRequestEntryEntity{
		{{Type: "user", Name: &name}, {Type: "client-id"}},
		{{Type: "ip", Name: &ip}},
	} {
		e := kmsg.NewAlterClientQuotasRequestEntry()
		e.Entity = ent
		for _, op := range []kmsg.AlterClientQuotasRequestEntryOp{
			{Key: "producer_byte_rate", Value: 1 << 20}, {Key: "producer_record_rate", Value: 5000},
			{Key: "violation_action", Value: 1}, {Key: "connection_creation_rate", Value: 3},
			{Key: "max_record_bytes", Remove: true},
		} {
			e.Ops = append(e.Ops, op)
		}
		a.Entries = append(a.Entries, e)
	}
	v := kmsg.NewPtrAlterClientQuotasRequest()
	v.Version, v.ValidateOnly = 0, true
	v.Entries = a.Entries[:1]
	return []kmsg.Request{d, a, v}
}
