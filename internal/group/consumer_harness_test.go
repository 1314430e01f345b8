package group

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Datadriven commands for KIP-848 consumer groups:
//
//	hb member=a [join|leave|static-leave|keepalive] [epoch=N] [id=X|noid] [v=1]
//	   [topics=(t,u)] [regex=R] [assignor=uniform] [instance=i] [rack=r]
//	   [rebalance=30s] [owned=(t/0,t/1)|owned=()] [group=g] [client=a]
//	cgdescribe [groups=(g,h)]
//	topic name=t partitions=N   (0 deletes it)
//
// A member's id is its alias (v1 clients make their own) unless id= or,
// for a v0 join, noid (the coordinator names it). Without join, leave or
// keepalive, a heartbeat is a full request: its subscription, rebalance
// timeout and the partitions the alias was last assigned (it revoked what
// it was asked to at once); keepalive sends none of them (revocation not
// done yet).
func (h *harness) runConsumer(d *datadriven.TestData) bool {
	switch d.Cmd {
	case "hb":
		h.consumerHeartbeat(d)
	case "cgdescribe":
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Version = int16(h.int(d, "v", 1))
		req.Groups = h.args(d, "groups")
		if req.Groups == nil {
			req.Groups = []string{"g"}
		}
		for _, g := range h.c.ConsumerGroupDescribe(req).Groups {
			if g.ErrorCode != 0 {
				h.printf("cgdescribe %s: %s", g.Group, code(g.ErrorCode))
				continue
			}
			h.printf("cgdescribe %s: NONE state=%s epoch=%d assignment-epoch=%d assignor=%s", g.Group, g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName)
			for _, m := range g.Members {
				extra := ""
				if m.InstanceID != nil {
					extra += " instance=" + *m.InstanceID
				}
				if m.SubscribedTopicRegex != nil {
					extra += " regex=" + *m.SubscribedTopicRegex
				}
				h.printf("  %s epoch=%d client=%s%s topics=%s assigned=%s target=%s type=%d", m.MemberID, m.MemberEpoch, m.ClientID, extra,
					strings.Join(m.SubscribedTopics, ","), describedTPs(m.Assignment), describedTPs(m.TargetAssignment), m.MemberType)
			}
		}
	case "topic":
		name := h.arg(d, "name", "")
		if n := h.int(d, "partitions", 0); n > 0 {
			h.topics[name] = int32(n)
		} else {
			delete(h.topics, name)
		}
		h.printf("ok")
	default:
		return false
	}
	return true
}

func describedTPs(a kmsg.Assignment) string {
	var parts []string
	for _, t := range a.TopicPartitions {
		for _, p := range t.Partitions {
			parts = append(parts, fmt.Sprintf("%s/%d", t.Topic, p))
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// topicOf names a fake topic id.
func topicOf(id [16]byte) string { return strings.TrimRight(string(id[:]), "\x00") }

// tps prints an assignment as topic/partition, sorted.
func tps(a assignment) string {
	var parts []string
	for _, id := range slices.SortedFunc(maps.Keys(a), func(x, y [16]byte) int { return strings.Compare(topicOf(x), topicOf(y)) }) {
		for _, p := range a[id] {
			parts = append(parts, fmt.Sprintf("%s/%d", topicOf(id), p))
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// parseTPs reads (t/0,t/1) into an assignment.
func parseTPs(vals []string) assignment {
	a := make(assignment)
	for _, v := range vals {
		topic, p, ok := strings.Cut(v, "/")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(p)
		var id [16]byte
		copy(id[:], topic)
		a.add(id, int32(n))
	}
	return a
}

func (h *harness) consumerHeartbeat(d *datadriven.TestData) {
	alias := h.arg(d, "member", "")
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = int16(h.int(d, "v", 1))
	req.Group = h.arg(d, "group", "g")
	h.mu.Lock()
	id, known := h.members[alias]
	if !known {
		id = alias
	}
	owned := h.owned[alias]
	subs := h.subs[alias]
	regex, hasRegex := h.regexes[alias]
	h.mu.Unlock()
	switch {
	case d.HasArg("id"):
		id = h.arg(d, "id", "")
	case d.HasArg("noid"):
		id = ""
	}
	req.MemberID = id
	full := func() {
		req.RebalanceTimeoutMillis = int32(h.dur(d, "rebalance", "30s").Milliseconds())
		req.SubscribedTopicNames = subs
		if hasRegex {
			req.SubscribedTopicRegex = &regex
		}
		if req.SubscribedTopicNames == nil && !d.HasArg("regex") && !hasRegex {
			req.SubscribedTopicNames = []string{"t"}
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	switch {
	case d.HasArg("join"):
		req.MemberEpoch = 0
		full()
		if d.HasArg("owned") {
			for _, tp := range parseTPs(h.args(d, "owned")).topicIDs() {
				req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp, Partitions: []int32{0}})
			}
		}
	case d.HasArg("leave"):
		req.MemberEpoch = leaveEpoch
	case d.HasArg("static-leave"):
		req.MemberEpoch = staticLeaveEpoch
	case d.HasArg("keepalive"):
		req.MemberEpoch = h.gen(d, alias, 0)
	default:
		req.MemberEpoch = h.gen(d, alias, 0)
		full()
		if d.HasArg("owned") {
			owned = parseTPs(h.args(d, "owned"))
		}
		owned.each(func(id [16]byte, p int32) {
			if n := len(req.Topics); n == 0 || req.Topics[n-1].TopicID != id {
				req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id})
			}
			req.Topics[len(req.Topics)-1].Partitions = append(req.Topics[len(req.Topics)-1].Partitions, p)
		})
	}
	if d.HasArg("epoch") {
		req.MemberEpoch = int32(h.int(d, "epoch", 0))
	}
	if d.HasArg("topics") {
		req.SubscribedTopicNames = h.args(d, "topics")
	}
	if d.HasArg("regex") {
		re := h.arg(d, "regex", "")
		req.SubscribedTopicRegex = &re
	}
	if d.HasArg("assignor") {
		a := h.arg(d, "assignor", "")
		req.ServerAssignor = &a
	}
	if d.HasArg("instance") {
		req.InstanceID = ptr(h.arg(d, "instance", ""))
	}
	if d.HasArg("rack") {
		req.RackID = ptr(h.arg(d, "rack", ""))
	}
	if d.HasArg("null-owned") {
		req.Topics = nil
	}
	client := h.arg(d, "client", alias)
	h.c.ConsumerGroupHeartbeat(req, client, "/10.0.0.1", func(resp *kmsg.ConsumerGroupHeartbeatResponse) {
		h.mu.Lock()
		if resp.ErrorCode == 0 && resp.MemberID != nil && req.MemberEpoch >= 0 {
			h.members[alias] = *resp.MemberID
			h.gens[alias] = resp.MemberEpoch
			if req.SubscribedTopicNames != nil {
				h.subs[alias] = req.SubscribedTopicNames
			}
			if req.SubscribedTopicRegex != nil {
				h.regexes[alias] = *req.SubscribedTopicRegex
			}
		}
		if resp.Assignment != nil {
			a := make(assignment)
			for _, t := range resp.Assignment.Topics {
				for _, p := range t.Partitions {
					a.add(t.TopicID, p)
				}
			}
			h.owned[alias] = a
		}
		if req.MemberEpoch < 0 && resp.ErrorCode == 0 {
			delete(h.owned, alias)
		}
		h.mu.Unlock()
		var b strings.Builder
		fmt.Fprintf(&b, "hb %s: %s", alias, code(resp.ErrorCode))
		if resp.ErrorCode == 0 {
			if resp.MemberID != nil && *resp.MemberID != alias {
				fmt.Fprintf(&b, " member=%s", *resp.MemberID)
			}
			fmt.Fprintf(&b, " epoch=%d", resp.MemberEpoch)
			if resp.Assignment != nil {
				a := make(assignment)
				for _, t := range resp.Assignment.Topics {
					for _, p := range t.Partitions {
						a.add(t.TopicID, p)
					}
				}
				fmt.Fprintf(&b, " assigned=%s", tps(a))
			}
			if resp.HeartbeatIntervalMillis != 5000 {
				fmt.Fprintf(&b, " interval=%dms", resp.HeartbeatIntervalMillis)
			}
		} else if resp.ErrorMessage != nil && d.HasArg("why") {
			fmt.Fprintf(&b, " (%s)", *resp.ErrorMessage)
		}
		h.printf("%s", b.String())
	})
}

// printConsumerState prints a consumer group from the inside; g is locked.
func (h *harness) printConsumerState(g *group) {
	cg := g.cg
	h.printf("%s: consumer %s epoch=%d assignment-epoch=%d assignor=%s rebalances=%d", g.id, g.stateName(), cg.epoch, cg.assignmentEpoch, cg.assignor, g.rebalances)
	for _, m := range cg.ordered() {
		var extra []string
		if m.instanceID != nil {
			extra = append(extra, "instance="+*m.instanceID)
		}
		if m.regex != "" {
			extra = append(extra, "regex="+m.regex)
		} else {
			extra = append(extra, "topics="+strings.Join(m.topics, ","))
		}
		if m.assignor != "" {
			extra = append(extra, "assignor="+m.assignor)
		}
		h.printf("  member %s %s epoch=%d prev=%d %s assigned=%s revoking=%s target=%s", m.id, strings.Join(extra, " "), m.epoch, m.prevEpoch, m.state, tps(m.assigned), tps(m.revoking), tps(cg.target[m.id]))
		if !m.revokeDeadline.IsZero() {
			h.printf("    revoke by +%s", m.revokeDeadline.Sub(epoch))
		}
	}
	for _, tp := range slices.SortedFunc(maps.Keys(g.offsets), compareTP) {
		o := g.offsets[tp]
		h.printf("  offset %s/%d=%d epoch=%d meta=%s committed=+%s", tp.topic, tp.partition, o.offset, o.leaderEpoch, short(o.metadata), time.UnixMilli(o.commitMillis).Sub(epoch))
	}
}

// consumerRecord describes a consumer group record for "records".
func (h *harness) consumerRecord(k decodedKey, value []byte) string {
	names := map[int16]string{
		recConsumerMetadata: "epoch", recConsumerPartitions: "partition-metadata", recConsumerMember: "member",
		recConsumerTargetMeta: "target-epoch", recConsumerTarget: "target", recConsumerCurrent: "current",
	}
	s := "consumer " + k.group + " " + names[k.typ]
	if k.member != "" {
		s += " " + k.member
	}
	if value == nil {
		return s + " tombstone"
	}
	v, err := decodeConsumerValue(k.typ, value)
	if err != nil {
		return s + " " + err.Error()
	}
	switch v := v.(type) {
	case int32:
		return fmt.Sprintf("%s=%d", s, v)
	case *memberMetaValue:
		str := func(p *string) string {
			if p == nil {
				return "-"
			}
			return *p
		}
		return fmt.Sprintf("%s client=%s topics=%s regex=%s assignor=%s instance=%s rebalance=%dms", s, v.clientID,
			strings.Join(v.topics, ","), str(v.regex), str(v.assignor), str(v.instanceID), v.rebalanceTimeoutMs)
	case assignment:
		return s + " " + tps(v)
	case *currentValue:
		return fmt.Sprintf("%s epoch=%d prev=%d %s assigned=%s revoking=%s", s, v.epoch, v.prevEpoch, v.state, tps(v.assigned), tps(v.revoking))
	}
	return s
}
