package handler

// ShareAcknowledge (key 79), versions 0-2: a share consumer acknowledges
// the records it acquired with ShareFetch (KIP-932): GAP 0, ACCEPT 1,
// RELEASE 2, REJECT 3 and, from v2 with IsRenewAck, RENEW 4 (KIP-1222:
// the lock is extended by share.record.lock.duration.ms). The request
// must carry the member's share session's next epoch (0 is
// INVALID_SHARE_SESSION_EPOCH: a session is opened by ShareFetch; no
// session is SHARE_SESSION_NOT_FOUND); -1 applies the acknowledgements
// and closes the session, giving back what the member still holds. Each
// partition's acknowledgements apply all or nothing: INVALID_RECORD_STATE
// when a record is not acquired by the member under a live lock,
// INVALID_REQUEST for a malformed batch or type, NOT_LEADER_OR_FOLLOWER
// with the current leader when this node does not lead the partition.
//
// The change is durable at the share coordinator before the answer (see
// 78_share_fetch.go; COORDINATOR_NOT_AVAILABLE when it cannot be).
// Rejected records and records past share.delivery.count.limit go to the
// group's dead-letter topic (KIP-1191) when it has one, else are
// archived at once.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(79, 0, 2, (*Broker).shareAcknowledge) }

func (b *Broker) shareAcknowledge(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.ShareAcknowledgeRequest)
	resp := r.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	if b.Shares == nil { // a handler built without share-partitions (tests)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return now(resp), nil
	}
	if b.groupDenied(req, opRead, deref(r.GroupID)) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp), nil
	}
	r = b.shareAckDenied(req, r, resp)
	fail := func(err error) (server.Reply, error) {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return now(resp), nil
	}
	group, member := deref(r.GroupID), deref(r.MemberID)
	resp.AcquisitionLockTimeoutMillis = int32(b.Shares.LockDuration(group).Milliseconds())
	if group == "" || member == "" {
		return fail(kerr.InvalidRequest)
	}
	if r.ShareSessionEpoch != -1 {
		if err := b.shareMemberCheck(group, member); err != nil {
			return fail(err)
		}
	}
	closed, err := b.Shares.Sessions.Acknowledge(group, member, r.ShareSessionEpoch)
	if err != nil {
		return fail(err)
	}
	im := b.image()
	for _, t := range r.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			sp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			sp.Partition = p.Partition
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
			bs := make([]ackBatch, len(p.AcknowledgementBatches))
			for i, a := range p.AcknowledgementBatches {
				bs[i] = ackBatch{a.FirstOffset, a.LastOffset, a.AcknowledgeTypes}
			}
			if err := b.ackShare(im, group, member, t.TopicID, p.Partition, bs, r.Version >= 2 && r.IsRenewAck); err != nil {
				sp.ErrorCode, sp.ErrorMessage = code(err), errMsg(err)
			}
			rt.Partitions = append(rt.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if closed {
		b.Shares.MembersGone(group, []string{member})
	}
	fillShareAckLeaders(im, resp)
	shareAckHintsOn(im, listenerOf(req), resp)
	return now(resp), nil
}

func fillShareAckLeaders(im *metadata.Image, resp *kmsg.ShareAcknowledgeResponse) {
	eps := endpoints{im: im}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code {
				continue
			}
			if leader, epoch, ok := leaderOf(im, "", t.TopicID, p.Partition); ok && leader >= 0 {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leader, epoch
				eps.add(leader)
			}
		}
	}
	for _, b := range eps.list {
		resp.NodeEndpoints = append(resp.NodeEndpoints, kmsg.ShareAcknowledgeResponseNodeEndpoint{NodeID: b.ID, Host: b.Host, Port: b.Port, Rack: rackPtr(b.Rack)})
	}
}
