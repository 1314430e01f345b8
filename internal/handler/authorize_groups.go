package handler

// The authorization of the group APIs' requests (authorize.go's helpers
// applied to their shapes): whole requests refused for their group, and
// the topics of a request split into the allowed ones, sent on, and the
// refused ones, answered TOPIC_AUTHORIZATION_FAILED.

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

// offsetCommitDenied answers an OffsetCommit the principal may not make:
// without READ on the group every partition gets GROUP_AUTHORIZATION_FAILED
// (nil request returned); else the topics without READ are cut out of the
// request and answered TOPIC_AUTHORIZATION_FAILED in denied.
func (b *Broker) offsetCommitDenied(req *server.Request, r *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitRequest, []kmsg.OffsetCommitResponseTopic) {
	answer := func(t kmsg.OffsetCommitRequestTopic, c int16) kmsg.OffsetCommitResponseTopic {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, c
			st.Partitions = append(st.Partitions, sp)
		}
		return st
	}
	var denied []kmsg.OffsetCommitResponseTopic
	if !b.authorized(req, opRead, rGroup, r.Group) {
		for _, t := range r.Topics {
			denied = append(denied, answer(t, kerr.GroupAuthorizationFailed.Code))
		}
		return nil, denied
	}
	im := b.image()
	var allowed []kmsg.OffsetCommitRequestTopic
	for _, t := range r.Topics {
		if b.topicDenied(req, im, opRead, t.Topic, t.TopicID, r.Version >= 10) {
			denied = append(denied, answer(t, kerr.TopicAuthorizationFailed.Code))
		} else {
			allowed = append(allowed, t)
		}
	}
	if denied == nil {
		return r, nil
	}
	if len(allowed) == 0 {
		return nil, denied
	}
	rest := *r
	rest.Topics = allowed
	return &rest, denied
}

// groupDenied is authorized for op on the group, for the keys that
// answer one error for the whole request.
func (b *Broker) groupDenied(req *server.Request, op kmsg.ACLOperation, group string) bool {
	return !b.authorized(req, op, rGroup, group)
}

// offsetFetchAuthorized runs an OffsetFetch with the principal's rights:
// DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on each
// topic asked for (TOPIC_AUTHORIZATION_FAILED), and, for "all topics",
// only the topics the principal may describe.
func (b *Broker) offsetFetchAuthorized(req *server.Request, r *kmsg.OffsetFetchRequest, fetch func(*kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse) *kmsg.OffsetFetchResponse {
	im := b.image()
	if r.Version < 8 {
		if b.groupDenied(req, opDescribe, r.Group) {
			resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			for _, t := range r.Topics {
				st := kmsg.NewOffsetFetchResponseTopic()
				st.Topic = t.Topic
				for _, p := range t.Partitions {
					sp := kmsg.NewOffsetFetchResponseTopicPartition()
					sp.Partition, sp.Offset, sp.ErrorCode = p, -1, kerr.GroupAuthorizationFailed.Code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp
		}
		rest := *r
		rest.Topics = nil
		var denied []kmsg.OffsetFetchResponseTopic
		for _, t := range r.Topics {
			if !b.topicDenied(req, im, opDescribe, t.Topic, [16]byte{}, false) {
				rest.Topics = append(rest.Topics, t)
				continue
			}
			st := kmsg.NewOffsetFetchResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetFetchResponseTopicPartition()
				sp.Partition, sp.Offset, sp.ErrorCode = p, -1, kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			denied = append(denied, st)
		}
		if r.Topics != nil && rest.Topics == nil {
			rest.Topics = []kmsg.OffsetFetchRequestTopic{}
		}
		resp := fetch(&rest)
		if r.Topics == nil { // all topics: hide the others
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if b.mayQuietly(req, opDescribe, rTopic, t.Topic) {
					kept = append(kept, t)
				}
			}
			resp.Topics = kept
		}
		resp.Topics = append(resp.Topics, denied...)
		return resp
	}
	rest := *r
	rest.Groups = nil
	var deniedGroups []kmsg.OffsetFetchResponseGroup
	deniedTopics := map[string][]kmsg.OffsetFetchResponseGroupTopic{}
	for _, g := range r.Groups {
		if b.groupDenied(req, opDescribe, g.Group) {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
			deniedGroups = append(deniedGroups, rg)
			continue
		}
		ng := g
		if g.Topics != nil {
			ng.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		}
		for _, t := range g.Topics {
			if !b.topicDenied(req, im, opDescribe, t.Topic, t.TopicID, r.Version >= 10) {
				ng.Topics = append(ng.Topics, t)
				continue
			}
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic, st.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				sp.Partition, sp.Offset, sp.ErrorCode = p, -1, kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			deniedTopics[g.Group] = append(deniedTopics[g.Group], st)
		}
		rest.Groups = append(rest.Groups, ng)
	}
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if len(rest.Groups) > 0 {
		resp = fetch(&rest)
	}
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if all := groupAsksAll(r, g.Group); all {
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				name := t.Topic
				if t.TopicID != [16]byte{} {
					if tt := im.TopicByID(t.TopicID); tt != nil {
						name = tt.Name
					}
				}
				if b.mayQuietly(req, opDescribe, rTopic, name) {
					kept = append(kept, t)
				}
			}
			g.Topics = kept
		}
		g.Topics = append(g.Topics, deniedTopics[g.Group]...)
	}
	resp.Groups = append(resp.Groups, deniedGroups...)
	return resp
}

func groupAsksAll(r *kmsg.OffsetFetchRequest, group string) bool {
	for _, g := range r.Groups {
		if g.Group == group {
			return g.Topics == nil
		}
	}
	return false
}

// splitGroups splits group ids into those the principal may do op on and
// the others (each denial logged).
func (b *Broker) splitGroups(req *server.Request, op kmsg.ACLOperation, groups []string) (allowed, denied []string) {
	if groups != nil {
		allowed = []string{}
	}
	for _, g := range groups {
		if b.authorized(req, op, rGroup, g) {
			allowed = append(allowed, g)
		} else {
			denied = append(denied, g)
		}
	}
	return allowed, denied
}

// heartbeatDenied checks a KIP-848 or share group heartbeat: READ on the
// group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on every subscribed topic
// (TOPIC_AUTHORIZATION_FAILED naming them). 0 when allowed.
func (b *Broker) heartbeatDenied(req *server.Request, group string, topics []string) (int16, *string) {
	if b.groupDenied(req, opRead, group) {
		return kerr.GroupAuthorizationFailed.Code, nil
	}
	var refused []string
	for _, t := range topics {
		if !b.authorized(req, opDescribe, rTopic, t) {
			refused = append(refused, t)
		}
	}
	if len(refused) > 0 {
		msg := "not authorized to describe the subscribed topics " + strings.Join(refused, ", ")
		return kerr.TopicAuthorizationFailed.Code, &msg
	}
	return 0, nil
}

// shareFetchDenied cuts the topics the principal may not READ out of a
// ShareFetch (they join no session, nothing of them is acquired or
// acknowledged) and answers their partitions TOPIC_AUTHORIZATION_FAILED
// in resp.
func (b *Broker) shareFetchDenied(req *server.Request, r *kmsg.ShareFetchRequest, resp *kmsg.ShareFetchResponse) *kmsg.ShareFetchRequest {
	im := b.image()
	var allowed []kmsg.ShareFetchRequestTopic
	for _, t := range r.Topics {
		if !b.topicDenied(req, im, opRead, "", t.TopicID, true) {
			allowed = append(allowed, t)
			continue
		}
		rt := kmsg.NewShareFetchResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			sp := kmsg.NewShareFetchResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
			sp.Records = []byte{}
			rt.Partitions = append(rt.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(allowed) == len(r.Topics) {
		return r
	}
	rest := *r
	rest.Topics = allowed
	return &rest
}

// shareAckDenied is shareFetchDenied for ShareAcknowledge.
func (b *Broker) shareAckDenied(req *server.Request, r *kmsg.ShareAcknowledgeRequest, resp *kmsg.ShareAcknowledgeResponse) *kmsg.ShareAcknowledgeRequest {
	im := b.image()
	var allowed []kmsg.ShareAcknowledgeRequestTopic
	for _, t := range r.Topics {
		if !b.topicDenied(req, im, opRead, "", t.TopicID, true) {
			allowed = append(allowed, t)
			continue
		}
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			sp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
			rt.Partitions = append(rt.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(allowed) == len(r.Topics) {
		return r
	}
	rest := *r
	rest.Topics = allowed
	return &rest
}

// hiddenTopics returns a message naming the topics of a group description
// the principal may not DESCRIBE (nil when it may describe them all): a
// described group's assignments must not show them, so Kafka answers the
// group TOPIC_AUTHORIZATION_FAILED.
func (b *Broker) hiddenTopics(req *server.Request, topics []string) *string {
	var hidden []string
	seen := map[string]bool{}
	for _, t := range topics {
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		if !b.mayQuietly(req, opDescribe, rTopic, t) {
			hidden = append(hidden, t)
		}
	}
	if hidden == nil {
		return nil
	}
	msg := "the group's assignments name topics the principal may not describe: " + strings.Join(hidden, ", ")
	return &msg
}
