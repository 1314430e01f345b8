package handler

// The audit trail's events from the handlers, in one place rather than in
// each key file: Handle wraps the Reply of the keys listed in auditKeys,
// and when the Reply runs (on the connection's write loop) the request
// and its response give one event per resource changed, with the outcome
// read from the response's error code for that resource. Management
// changes (topics, configs, ACLs, quotas, users, group offsets, the
// quorum, DLQ purge and redrive) become "management" events; the reads
// and writes of Produce, Fetch and ShareFetch become "authorization"
// allows, which the audit writer aggregates per principal, resource and
// interval (so "who read orders last Tuesday" has an answer). Denials are
// the authorizer's to record (auth.Auditor from authorize.go's callers).
// Nothing here runs when the audit trail is off (NopAuditor).

import (
	"cmp"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

// The client ids of `berth dlq purge` and `berth dlq redrive` (internal/cli):
// their DeleteRecords and offset commits are recorded as DLQ events.
const (
	ClientIDDLQPurge   = "berth-dlq-purge"
	ClientIDDLQRedrive = "berth-dlq-redrive"
)

// auditTopic is the audit trail's own topic: its writes are not audited.
const auditTopic = "__berth_audit"

// auditFunc makes the events of one request and its response.
type auditFunc func(b *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event))

// auditKeys are the keys whose replies are audited, by key number (so a
// key served later, such as AlterUserScramCredentials, is audited once
// it is registered).
var auditKeys = map[int16]auditFunc{
	0: auditProduce, 1: auditFetch, 78: auditShareFetch,
	8: auditOffsetCommit, 19: auditCreateTopics, 20: auditDeleteTopics, 21: auditDeleteRecords,
	30: auditCreateACLs, 31: auditDeleteACLs, 33: auditAlterConfigs, 37: auditCreatePartitions,
	42: auditDeleteGroups, 43: auditElectLeaders, 44: auditIncrementalAlterConfigs,
	45: auditReassign, 47: auditOffsetDelete, 49: auditAlterClientQuotas, 51: auditAlterSCRAM,
	80: auditAddVoter, 81: auditRemoveVoter, 91: auditAlterShareOffsets, 92: auditDeleteShareOffsets,
}

// auditReply wraps r so that its response is audited when it runs.
func (b *Broker) auditReply(req *server.Request, r server.Reply) server.Reply {
	if !b.auditOn || r == nil {
		return r
	}
	f := auditKeys[req.Key]
	if f == nil {
		return r
	}
	return func() kmsg.Response {
		resp := r()
		if resp != nil && req.Body != nil {
			f(b, req, resp, func(e auth.Event) {
				if !e.Allowed && e.Error != "" && e.Kind == "" {
					// A refusal by the authorizer, which audited it
					// already (authorize.go): one event, not two.
					return
				}
				e.Kind = cmp.Or(e.Kind, "management")
				b.auditRequest(req, e)
			})
		}
		return resp
	}
}

// auditRequest sends e, filled in with what req says of who asked (time,
// principal, client address, listener, client id, API) where e leaves
// it empty. The authorizer's and SASL's events can go through it to
// carry the request's metadata.
func (b *Broker) auditRequest(req *server.Request, e auth.Event) {
	base := b.auditBase(req)
	if e.Time.IsZero() {
		e.Time = base.Time
	}
	if e.Principal.IsZero() {
		e.Principal = base.Principal
	}
	e.Host = cmp.Or(e.Host, base.Host)
	e.Listener = cmp.Or(e.Listener, base.Listener)
	e.ClientID = cmp.Or(e.ClientID, base.ClientID)
	e.Method = cmp.Or(e.Method, base.Method)
	b.Auditor.Audit(e)
}

// auditBase is what every event of req carries.
func (b *Broker) auditBase(req *server.Request) auth.Event {
	e := auth.Event{Time: time.Now(), Principal: req.Conn.Principal(), ClientID: req.ClientID,
		Method: kmsg.NameForKey(req.Key)}
	if req.Conn != nil {
		e.Host, e.Listener = req.Conn.Remote, req.Conn.Listener
	}
	return e
}

// auditOutcome fills an event's Allowed and Error from a Kafka error code: an
// authorization failure is a denial, another error a failed change.
func auditOutcome(e auth.Event, code int16) auth.Event {
	e.Allowed = true
	if code == 0 {
		return e
	}
	err := kerr.ErrorForCode(code)
	if ke, ok := err.(*kerr.Error); ok {
		e.Error = ke.Message
	} else {
		e.Error = "UNKNOWN_ERROR_" + strconv.Itoa(int(code))
	}
	if auditDeniedCodes[code] {
		e.Allowed = false
	}
	return e
}

// auditDeniedCodes are Kafka's *_AUTHORIZATION_FAILED codes (topic 29,
// group 30, cluster 31, transactional id 53, delegation token 65), read
// from responses here, by number (docs_test takes a kerr name in handler
// code for a code the handlers return).
var auditDeniedCodes = map[int16]bool{29: true, 30: true, 31: true, 53: true, 65: true}

// auditFirstErr is the first non-zero code.
func auditFirstErr(codes ...int16) int16 {
	for _, c := range codes {
		if c != 0 {
			return c
		}
	}
	return 0
}

// auditSensitive reports a config whose value is a secret, logged
// redacted: Kafka's password-type settings and JAAS configs.
func auditSensitive(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".password") || strings.HasSuffix(n, "sasl.jaas.config") ||
		strings.Contains(n, "secret") || strings.HasSuffix(n, ".key") || strings.Contains(n, "credentials")
}

// auditConfigValue is how a config value is recorded.
func auditConfigValue(name string, v *string) string {
	switch {
	case v == nil:
		return "(null)"
	case auditSensitive(name):
		return "[redacted]"
	}
	return *v
}

// auditTopicName names a topic of a response by name or, from v13 on, id.
func auditTopicName(im *metadata.Image, name string, id [16]byte) string {
	if name != "" {
		return name
	}
	if t := im.TopicByID(id); t != nil {
		return t.Name
	}
	return fmt.Sprintf("%x", id)
}

// ---- data plane: aggregated allows ----

func auditProduce(b *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	r, ok := resp.(*kmsg.ProduceResponse)
	if !ok {
		return
	}
	var im *metadata.Image
	for _, t := range r.Topics {
		if t.Topic == "" && im == nil {
			im = b.image()
		}
		name := auditTopicName(im, t.Topic, t.TopicID)
		if name == auditTopic {
			continue
		}
		if auditDataAllowed(len(t.Partitions), func(i int) int16 { return t.Partitions[i].ErrorCode }) {
			ev(auth.Event{Kind: "authorization", Operation: "WRITE", ResourceType: "TOPIC", ResourceName: name, Allowed: true})
		}
	}
}

func auditFetch(b *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.FetchRequest)
	if q == nil || q.ReplicaID >= 0 || q.ReplicaState.ID >= 0 {
		return // a follower's fetch
	}
	var r *kmsg.FetchResponse
	switch v := resp.(type) {
	case fetchResponse:
		r = v.FetchResponse
	case *kmsg.FetchResponse:
		r = v
	default:
		return
	}
	var im *metadata.Image
	for _, t := range r.Topics {
		if t.Topic == "" && im == nil {
			im = b.image()
		}
		if auditDataAllowed(len(t.Partitions), func(i int) int16 { return t.Partitions[i].ErrorCode }) {
			ev(auth.Event{Kind: "authorization", Operation: "READ", ResourceType: "TOPIC", ResourceName: auditTopicName(im, t.Topic, t.TopicID), Allowed: true})
		}
	}
}

func auditShareFetch(b *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	r, ok := resp.(*kmsg.ShareFetchResponse)
	if !ok {
		return
	}
	im := b.image()
	for _, t := range r.Topics {
		if auditDataAllowed(len(t.Partitions), func(i int) int16 { return t.Partitions[i].ErrorCode }) {
			ev(auth.Event{Kind: "authorization", Operation: "READ", ResourceType: "TOPIC", ResourceName: auditTopicName(im, "", t.TopicID), Allowed: true})
		}
	}
}

// auditDataAllowed reports a topic of a produce or fetch answer whose access
// was allowed: some partition not refused by authorization.
func auditDataAllowed(n int, code func(int) int16) bool {
	for i := 0; i < n; i++ {
		if code(i) != 29 { // TOPIC_AUTHORIZATION_FAILED
			return true
		}
	}
	return false
}

// ---- topics ----

func auditCreateTopics(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.CreateTopicsRequest)
	r, _ := resp.(*kmsg.CreateTopicsResponse)
	if q == nil || r == nil {
		return
	}
	codes := map[string]int16{}
	for _, t := range r.Topics {
		codes[t.Topic] = t.ErrorCode
	}
	for _, t := range q.Topics {
		d := map[string]string{"partitions": strconv.Itoa(int(t.NumPartitions)), "replication_factor": strconv.Itoa(int(t.ReplicationFactor))}
		for _, c := range t.Configs {
			d["config."+c.Name] = auditConfigValue(c.Name, c.Value)
		}
		if q.ValidateOnly {
			d["validate_only"] = "true"
		}
		ev(auditOutcome(auth.Event{Operation: "CREATE", ResourceType: "TOPIC", ResourceName: t.Topic, Detail: d}, codes[t.Topic]))
	}
}

func auditDeleteTopics(b *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	r, _ := resp.(*kmsg.DeleteTopicsResponse)
	if r == nil {
		return
	}
	for _, t := range r.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		} else {
			name = fmt.Sprintf("%x", t.TopicID)
		}
		ev(auditOutcome(auth.Event{Operation: "DELETE", ResourceType: "TOPIC", ResourceName: name}, t.ErrorCode))
	}
}

func auditDeleteRecords(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.DeleteRecordsRequest)
	r, _ := resp.(*kmsg.DeleteRecordsResponse)
	if q == nil || r == nil {
		return
	}
	codes := map[string][]int16{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			codes[t.Topic] = append(codes[t.Topic], p.ErrorCode)
		}
	}
	for _, t := range q.Topics {
		var parts []string
		for _, p := range t.Partitions {
			parts = append(parts, strconv.Itoa(int(p.Partition))+":"+strconv.FormatInt(p.Offset, 10))
		}
		e := auth.Event{Operation: "DELETE", ResourceType: "TOPIC", ResourceName: t.Topic,
			Detail: map[string]string{"before_offsets": strings.Join(parts, ",")}}
		if req.ClientID == ClientIDDLQPurge {
			e.Type = "io.berth.dlq.purge"
		}
		ev(auditOutcome(e, auditFirstErr(codes[t.Topic]...)))
	}
}

func auditCreatePartitions(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.CreatePartitionsRequest)
	r, _ := resp.(*kmsg.CreatePartitionsResponse)
	if q == nil || r == nil {
		return
	}
	codes := map[string]int16{}
	for _, t := range r.Topics {
		codes[t.Topic] = t.ErrorCode
	}
	for _, t := range q.Topics {
		d := map[string]string{"count": strconv.Itoa(int(t.Count))}
		if q.ValidateOnly {
			d["validate_only"] = "true"
		}
		ev(auditOutcome(auth.Event{Operation: "ALTER", ResourceType: "TOPIC", ResourceName: t.Topic, Detail: d}, codes[t.Topic]))
	}
}

func auditReassign(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	r, _ := resp.(*kmsg.AlterPartitionAssignmentsResponse)
	if q == nil || r == nil {
		return
	}
	codes := map[string][]int16{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			codes[t.Topic] = append(codes[t.Topic], p.ErrorCode)
		}
	}
	for _, t := range q.Topics {
		var parts []string
		for _, p := range t.Partitions {
			s := strconv.Itoa(int(p.Partition)) + "=cancel"
			if p.Replicas != nil {
				s = strconv.Itoa(int(p.Partition)) + "=" + auditJoinInts(p.Replicas)
			}
			parts = append(parts, s)
		}
		ev(auditOutcome(auth.Event{Operation: "ALTER", ResourceType: "TOPIC", ResourceName: t.Topic,
			Detail: map[string]string{"reassignment": strings.Join(parts, " ")}}, auditFirstErr(append([]int16{r.ErrorCode}, codes[t.Topic]...)...)))
	}
}

func auditElectLeaders(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.ElectLeadersRequest)
	r, _ := resp.(*kmsg.ElectLeadersResponse)
	if q == nil || r == nil {
		return
	}
	typ := map[int8]string{0: "preferred", 1: "unclean"}[q.ElectionType]
	if q.Topics == nil {
		ev(auditOutcome(auth.Event{Operation: "ALTER", ResourceType: "CLUSTER", ResourceName: "kafka-cluster",
			Detail: map[string]string{"election_type": typ, "partitions": "all"}}, r.ErrorCode))
		return
	}
	codes := map[string][]int16{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != kerr.ElectionNotNeeded.Code {
				codes[t.Topic] = append(codes[t.Topic], p.ErrorCode)
			}
		}
	}
	for _, t := range q.Topics {
		ev(auditOutcome(auth.Event{Operation: "ALTER", ResourceType: "TOPIC", ResourceName: t.Topic,
			Detail: map[string]string{"election_type": typ, "partitions": auditJoinInts(t.Partitions)}}, auditFirstErr(append([]int16{r.ErrorCode}, codes[t.Topic]...)...)))
	}
}

// ---- configs ----

// auditConfigResource names a config resource as the audit trail does.
func auditConfigResource(t kmsg.ConfigResourceType, name string) (string, string) {
	switch t {
	case kmsg.ConfigResourceTypeTopic:
		return "TOPIC", name
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if name == "" {
			return "CLUSTER", "kafka-cluster"
		}
		return "BROKER", name
	case kmsg.ConfigResourceTypeGroupConfig:
		return "GROUP", name
	}
	return strings.ToUpper(t.String()), name
}

func auditAlterConfigs(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.AlterConfigsRequest)
	r, _ := resp.(*kmsg.AlterConfigsResponse)
	if q == nil || r == nil {
		return
	}
	codes := map[[2]string]int16{}
	for _, x := range r.Resources {
		codes[[2]string{x.ResourceType.String(), x.ResourceName}] = x.ErrorCode
	}
	for _, x := range q.Resources {
		d := map[string]string{"mode": "replace"}
		for _, c := range x.Configs {
			d["config."+c.Name] = auditConfigValue(c.Name, c.Value)
		}
		if q.ValidateOnly {
			d["validate_only"] = "true"
		}
		typ, name := auditConfigResource(x.ResourceType, x.ResourceName)
		ev(auditOutcome(auth.Event{Operation: "ALTER_CONFIGS", ResourceType: typ, ResourceName: name, Detail: d},
			codes[[2]string{x.ResourceType.String(), x.ResourceName}]))
	}
}

func auditIncrementalAlterConfigs(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.IncrementalAlterConfigsRequest)
	r, _ := resp.(*kmsg.IncrementalAlterConfigsResponse)
	if q == nil || r == nil {
		return
	}
	codes := map[[2]string]int16{}
	for _, x := range r.Resources {
		codes[[2]string{x.ResourceType.String(), x.ResourceName}] = x.ErrorCode
	}
	for _, x := range q.Resources {
		d := map[string]string{}
		for _, c := range x.Configs {
			op := strings.ToLower(c.Op.String())
			if c.Op == kmsg.IncrementalAlterConfigOpDelete {
				d["config."+c.Name] = "(" + op + ")"
				continue
			}
			d["config."+c.Name] = auditConfigValue(c.Name, c.Value)
			if c.Op != kmsg.IncrementalAlterConfigOpSet {
				d["config."+c.Name] += " (" + op + ")"
			}
		}
		if q.ValidateOnly {
			d["validate_only"] = "true"
		}
		typ, name := auditConfigResource(x.ResourceType, x.ResourceName)
		ev(auditOutcome(auth.Event{Operation: "ALTER_CONFIGS", ResourceType: typ, ResourceName: name, Detail: d},
			codes[[2]string{x.ResourceType.String(), x.ResourceName}]))
	}
}

// ---- groups and offsets ----

func auditDeleteGroups(_ *Broker, _ *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	r, _ := resp.(*kmsg.DeleteGroupsResponse)
	if r == nil {
		return
	}
	for _, g := range r.Groups {
		ev(auditOutcome(auth.Event{Operation: "DELETE", ResourceType: "GROUP", ResourceName: g.Group}, g.ErrorCode))
	}
}

func auditOffsetDelete(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.OffsetDeleteRequest)
	r, _ := resp.(*kmsg.OffsetDeleteResponse)
	if q == nil || r == nil {
		return
	}
	codes := []int16{r.ErrorCode}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	var parts []string
	for _, t := range q.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, t.Topic+"/"+strconv.Itoa(int(p.Partition)))
		}
	}
	ev(auditOutcome(auth.Event{Operation: "DELETE", ResourceType: "GROUP", ResourceName: q.Group,
		Detail: map[string]string{"offsets": strings.Join(parts, ",")}}, auditFirstErr(codes...)))
}

// auditOffsetCommit records the commits of admin tools (berth group
// reset-offsets, kafka-consumer-groups.sh --reset-offsets, berth dlq
// redrive): generation -1 and no member. A consumer's own commits are
// not management events.
func auditOffsetCommit(b *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.OffsetCommitRequest)
	r, _ := resp.(*kmsg.OffsetCommitResponse)
	if q == nil || r == nil || q.Generation >= 0 || q.MemberID != "" {
		return
	}
	var codes []int16
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	var parts []string
	var im *metadata.Image
	for _, t := range q.Topics {
		if t.Topic == "" && im == nil {
			im = b.image() // v10+: topic ids
		}
		name := auditTopicName(im, t.Topic, t.TopicID)
		for _, p := range t.Partitions {
			parts = append(parts, name+"/"+strconv.Itoa(int(p.Partition))+"="+strconv.FormatInt(p.Offset, 10))
		}
	}
	e := auth.Event{Operation: "READ", ResourceType: "GROUP", ResourceName: q.Group,
		Detail: map[string]string{"offsets": strings.Join(parts, ",")}}
	if req.ClientID == ClientIDDLQRedrive {
		e.Type = "io.berth.dlq.redrive"
	}
	ev(auditOutcome(e, auditFirstErr(codes...)))
}

func auditAlterShareOffsets(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	r, _ := resp.(*kmsg.AlterShareGroupOffsetsResponse)
	if q == nil || r == nil {
		return
	}
	codes := []int16{r.ErrorCode}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	var parts []string
	for _, t := range q.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, t.Topic+"/"+strconv.Itoa(int(p.Partition))+"="+strconv.FormatInt(p.StartOffset, 10))
		}
	}
	ev(auditOutcome(auth.Event{Operation: "READ", ResourceType: "GROUP", ResourceName: q.GroupID,
		Detail: map[string]string{"start_offsets": strings.Join(parts, ",")}}, auditFirstErr(codes...)))
}

func auditDeleteShareOffsets(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	r, _ := resp.(*kmsg.DeleteShareGroupOffsetsResponse)
	if q == nil || r == nil {
		return
	}
	codes := []int16{r.ErrorCode}
	for _, t := range r.Topics {
		codes = append(codes, t.ErrorCode)
	}
	var topics []string
	for _, t := range q.Topics {
		topics = append(topics, t.Topic)
	}
	ev(auditOutcome(auth.Event{Operation: "DELETE", ResourceType: "GROUP", ResourceName: q.GroupID,
		Detail: map[string]string{"topics": strings.Join(topics, ",")}}, auditFirstErr(codes...)))
}

// ---- ACLs, quotas, users ----

// auditACLDetail describes an ACL binding.
func auditACLDetail(principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) map[string]string {
	return map[string]string{"acl.principal": principal, "acl.host": host, "acl.operation": op.String(), "acl.permission": perm.String()}
}

func auditCreateACLs(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.CreateACLsRequest)
	r, _ := resp.(*kmsg.CreateACLsResponse)
	if q == nil || r == nil {
		return
	}
	for i, c := range q.Creations {
		var code int16
		if i < len(r.Results) {
			code = r.Results[i].ErrorCode
		}
		ev(auditOutcome(auth.Event{Operation: "ALTER", ResourceType: strings.ToUpper(c.ResourceType.String()), ResourceName: c.ResourceName,
			PatternType: strings.ToUpper(c.ResourcePatternType.String()),
			Detail:      auditWithAction(auditACLDetail(c.Principal, c.Host, c.Operation, c.PermissionType), "create")}, code))
	}
}

func auditDeleteACLs(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.DeleteACLsRequest)
	r, _ := resp.(*kmsg.DeleteACLsResponse)
	if q == nil || r == nil {
		return
	}
	for i, f := range q.Filters {
		if i >= len(r.Results) {
			break
		}
		res := r.Results[i]
		if res.ErrorCode != 0 || len(res.MatchingACLs) == 0 {
			d := map[string]string{"action": "delete", "matched": "0"}
			if f.Principal != nil {
				d["acl.principal"] = *f.Principal
			}
			name := ""
			if f.ResourceName != nil {
				name = *f.ResourceName
			}
			ev(auditOutcome(auth.Event{Operation: "ALTER", ResourceType: strings.ToUpper(f.ResourceType.String()), ResourceName: name,
				PatternType: strings.ToUpper(f.ResourcePatternType.String()), Detail: d}, res.ErrorCode))
			continue
		}
		for _, m := range res.MatchingACLs {
			ev(auditOutcome(auth.Event{Operation: "ALTER", ResourceType: strings.ToUpper(m.ResourceType.String()), ResourceName: m.ResourceName,
				PatternType: strings.ToUpper(m.ResourcePatternType.String()),
				Detail:      auditWithAction(auditACLDetail(m.Principal, m.Host, m.Operation, m.PermissionType), "delete")}, m.ErrorCode))
		}
	}
}

func auditWithAction(d map[string]string, action string) map[string]string {
	d["action"] = action
	return d
}

func auditAlterClientQuotas(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.AlterClientQuotasRequest)
	r, _ := resp.(*kmsg.AlterClientQuotasResponse)
	if q == nil || r == nil {
		return
	}
	for i, en := range q.Entries {
		var code int16
		if i < len(r.Entries) {
			code = r.Entries[i].ErrorCode
		}
		var ent []string
		for _, x := range en.Entity {
			n := "<default>"
			if x.Name != nil {
				n = *x.Name
			}
			ent = append(ent, x.Type+"="+n)
		}
		sort.Strings(ent)
		d := map[string]string{}
		for _, op := range en.Ops {
			if op.Remove {
				d["quota."+op.Key] = "(delete)"
			} else {
				d["quota."+op.Key] = strconv.FormatFloat(op.Value, 'f', -1, 64)
			}
		}
		if q.ValidateOnly {
			d["validate_only"] = "true"
		}
		ev(auditOutcome(auth.Event{Operation: "ALTER_CONFIGS", ResourceType: "CLIENT_QUOTA", ResourceName: strings.Join(ent, ","), Detail: d}, code))
	}
}

// auditAlterSCRAM records the user and mechanism of each change, never
// the salt or salted password.
func auditAlterSCRAM(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	r, _ := resp.(*kmsg.AlterUserSCRAMCredentialsResponse)
	if q == nil || r == nil {
		return
	}
	codes := map[string]int16{}
	for _, x := range r.Results {
		codes[x.User] = x.ErrorCode
	}
	mech := map[int8]string{1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
	for _, d := range q.Deletions {
		ev(auditOutcome(auth.Event{Operation: "ALTER", ResourceType: "USER", ResourceName: d.Name,
			Detail: map[string]string{"action": "delete", "mechanism": mech[d.Mechanism]}}, codes[d.Name]))
	}
	for _, u := range q.Upsertions {
		ev(auditOutcome(auth.Event{Operation: "ALTER", ResourceType: "USER", ResourceName: u.Name,
			Detail: map[string]string{"action": "upsert", "mechanism": mech[u.Mechanism], "iterations": strconv.Itoa(int(u.Iterations))}}, codes[u.Name]))
	}
}

// ---- the quorum ----

func auditAddVoter(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.AddRaftVoterRequest)
	r, _ := resp.(*kmsg.AddRaftVoterResponse)
	if q == nil || r == nil {
		return
	}
	ev(auditOutcome(auth.Event{Operation: "ALTER", ResourceType: "CLUSTER", ResourceName: "kafka-cluster",
		Detail: map[string]string{"action": "add_voter", "voter_id": strconv.Itoa(int(q.VoterID))}}, r.ErrorCode))
}

func auditRemoveVoter(_ *Broker, req *server.Request, resp kmsg.Response, ev func(auth.Event)) {
	q, _ := req.Body.(*kmsg.RemoveRaftVoterRequest)
	r, _ := resp.(*kmsg.RemoveRaftVoterResponse)
	if q == nil || r == nil {
		return
	}
	ev(auditOutcome(auth.Event{Operation: "ALTER", ResourceType: "CLUSTER", ResourceName: "kafka-cluster",
		Detail: map[string]string{"action": "remove_voter", "voter_id": strconv.Itoa(int(q.VoterID))}}, r.ErrorCode))
}

func auditJoinInts(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, ",")
}
