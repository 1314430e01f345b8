package group

// ShareGroupHeartbeat, versions 0-1 (KIP-932): joins (member epoch 0),
// heartbeats and leaves (-1). v1 members bring their own member id (a
// UUID they keep for life); v0 (Kafka 4.0's early access) members may
// leave it to the coordinator on their join.
//
// Errors are Kafka's, with Kafka's messages: INVALID_REQUEST for a bad
// request, GROUP_ID_NOT_FOUND for a heartbeat or leave to a group that
// does not exist, GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID,
// FENCED_MEMBER_EPOCH (an epoch neither the member's nor its previous
// one), COORDINATOR_NOT_AVAILABLE while the group is being deleted.
//
// One difference: a member epoch 0 heartbeat from a known member (it was
// fenced, or lost an answer) is a rejoin in place. Kafka fences it (its
// epoch is neither the current nor the previous one) until the member's
// session expires, while kgo and the Java client keep their member id on
// FENCED_MEMBER_EPOCH and rejoin with epoch 0 at once, so under Kafka
// such a member is out for up to a session timeout. Berth takes it back
// at once, as its consumer groups do. And a heartbeat with the member's
// previous epoch (accepted: the answer that moved it on was lost) gets
// the assignment back; Kafka sends none unless it changed again, so the
// member would keep its old one until it sends a full request.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareLeaveEpoch is the member epoch of a leave.
const shareLeaveEpoch = -1

// shareError is a failed heartbeat: a code and Kafka's message.
type shareError struct {
	code int16
	msg  string
}

func shareErr(e *kerr.Error, format string, args ...any) *shareError {
	return &shareError{code: e.Code, msg: fmt.Sprintf(format, args...)}
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

// checkShareHeartbeat is Kafka's check of a ShareGroupHeartbeat before
// the group is looked at: 0 or INVALID_REQUEST with its message.
func checkShareHeartbeat(req *kmsg.ShareGroupHeartbeatRequest) (int16, string) {
	if e := validateShareHeartbeat(req); e != nil {
		return e.code, e.msg
	}
	return 0, ""
}

func validateShareHeartbeat(req *kmsg.ShareGroupHeartbeatRequest) *shareError {
	invalid := func(msg string) *shareError { return shareErr(kerr.InvalidRequest, "%s", msg) }
	switch {
	case isBlank(req.MemberID) && (req.Version >= 1 || req.MemberEpoch != 0):
		return invalid("MemberId can't be empty.")
	case isBlank(req.GroupID):
		return invalid("GroupId can't be empty.")
	case req.RackID != nil && isBlank(*req.RackID):
		return invalid("RackId can't be empty.")
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return invalid("SubscribedTopicNames must be set in first request.")
	case req.MemberEpoch < shareLeaveEpoch:
		return invalid("MemberEpoch is invalid.")
	}
	return nil
}

// shareHeartbeatError is a ShareGroupHeartbeat answer with an error (the
// owner's own errors: NOT_COORDINATOR, a failed write, ...).
func shareHeartbeatError(req *kmsg.ShareGroupHeartbeatRequest, code int16, msg string) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = &msg
	}
	return resp
}

// Heartbeat serves a ShareGroupHeartbeat of this group (req.GroupID is
// g's id) sent by client at now. It returns the answer, to send once the
// change's records are durable (a failed write answers the write's error
// instead, and the owner rewrites Snapshot at the next change), and the
// change. A failed request changes nothing.
func (g *shareMembership) Heartbeat(req *kmsg.ShareGroupHeartbeatRequest, client shareClient, now time.Time) (*kmsg.ShareGroupHeartbeatResponse, shareChange) {
	var ch shareChange
	resp, e := g.heartbeat(req, client, now, &ch)
	if e != nil {
		return shareHeartbeatError(req, e.code, e.msg), shareChange{}
	}
	return resp, ch
}

func (g *shareMembership) heartbeat(req *kmsg.ShareGroupHeartbeatRequest, client shareClient, now time.Time, ch *shareChange) (*kmsg.ShareGroupHeartbeatResponse, *shareError) {
	if e := validateShareHeartbeat(req); e != nil {
		return nil, e
	}
	switch {
	case g.dead:
		// Being deleted: the client looks the coordinator up again.
		return nil, &shareError{code: kerr.CoordinatorNotAvailable.Code}
	case g.epoch == 0 && req.MemberEpoch != 0:
		return nil, shareErr(kerr.GroupIDNotFound, "Share group %s not found.", req.GroupID)
	case req.MemberEpoch == shareLeaveEpoch:
		return g.leave(req, ch)
	case len(g.members) >= g.cfg.MaxSize && (isBlank(req.MemberID) || g.members[req.MemberID] == nil):
		return nil, shareErr(kerr.GroupMaxSizeReached, "The share group has reached its maximum capacity of %d members.", g.cfg.MaxSize)
	}

	memberID := req.MemberID
	if isBlank(memberID) { // v0 join: the coordinator names the member
		memberID = g.cfg.newMemberID()
	}
	m := g.members[memberID]
	switch {
	case m == nil && req.MemberEpoch != 0:
		return nil, shareErr(kerr.UnknownMemberID, "Member %s is not a member of group %s.", memberID, g.id)
	case m == nil:
		m = &shareMember{id: memberID, assigned: make(shareAssignment)}
	case req.MemberEpoch == 0:
		// A known member rejoining: taken back in place (see above).
	case req.MemberEpoch > m.epoch:
		return nil, shareErr(kerr.FencedMemberEpoch, "The share group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch)
	case req.MemberEpoch < m.epoch && req.MemberEpoch != m.prevEpoch:
		return nil, shareErr(kerr.FencedMemberEpoch, "The share group member has a smaller member epoch (%d) than the one known by the group coordinator (%d), and it does not match the previous member epoch (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch, m.prevEpoch)
	}

	// Valid: from here on the heartbeat changes the group.
	isNew := g.members[memberID] == nil
	lost := req.MemberEpoch > 0 && req.MemberEpoch < m.epoch // came with its previous epoch
	before := m.assigned
	subscribed, changed := m.apply(req, client)
	m.lastHeartbeat = now
	if isNew {
		g.members[m.id] = m
		g.target[m.id] = make(shareAssignment)
	}
	if changed || isNew {
		ch.add(shareMemberRecord(g.id, m))
	}
	if subscribed || isNew || g.topicsChanged() {
		g.bump(ch)
	}
	reconciled := g.reconcile(m, ch)

	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	id := m.id
	resp.MemberID = &id
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(g.cfg.HeartbeatInterval / time.Millisecond)
	// The assignment goes to a join, a full request (one with its
	// subscription: sent on joining and after errors) and whoever's
	// assignment changed, as in Kafka; and (Berth) to a member that came
	// with its previous epoch: the answer that moved it on, and carried
	// its new assignment, was lost.
	if req.MemberEpoch == 0 || req.SubscribedTopicNames != nil || lost || (reconciled && !m.assigned.Equal(before)) {
		resp.Assignment = shareResponseAssignment(m.assigned)
	}
	return resp, nil
}

// apply applies a heartbeat's member fields (nil: unchanged) and reports
// whether the subscription changed and whether anything persisted did.
func (m *shareMember) apply(req *kmsg.ShareGroupHeartbeatRequest, client shareClient) (subscribed, changed bool) {
	if m.clientID != client.ID || m.clientHost != client.Host {
		m.clientID, m.clientHost, changed = client.ID, client.Host, true
	}
	if req.RackID != nil && (m.rackID == nil || *m.rackID != *req.RackID) {
		rack := *req.RackID
		m.rackID, changed = &rack, true
	}
	if req.SubscribedTopicNames != nil {
		topics := slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))
		if topics == nil {
			topics = []string{}
		}
		if !slices.Equal(topics, m.topics) {
			m.topics, subscribed, changed = topics, true, true
		}
	}
	return subscribed, changed
}

// leave serves member epoch -1.
func (g *shareMembership) leave(req *kmsg.ShareGroupHeartbeatRequest, ch *shareChange) (*kmsg.ShareGroupHeartbeatResponse, *shareError) {
	m := g.members[req.MemberID]
	if m == nil {
		return nil, shareErr(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, g.id)
	}
	g.remove(m, "left", ch)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	id := req.MemberID
	resp.MemberID, resp.MemberEpoch = &id, shareLeaveEpoch
	return resp, nil
}

func shareResponseAssignment(a shareAssignment) *kmsg.ShareGroupHeartbeatResponseAssignment {
	out := kmsg.NewShareGroupHeartbeatResponseAssignment()
	out.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
	for _, id := range a.TopicIDs() {
		t := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
		t.TopicID, t.Partitions = id, slices.Clone(a[id])
		out.TopicPartitions = append(out.TopicPartitions, t)
	}
	return &out
}
