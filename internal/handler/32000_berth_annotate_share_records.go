package handler

// BerthAnnotateShareRecords (key 32000, Berth's own), version 0
// (flexible): a share-group member attaches its error text to records it
// holds, just before it REJECTs them, so the dead-letter record carries
// the text in __dlq.errors.berth.client.error (stock Kafka clients cannot
// send text with an acknowledgement). Sent to the partition leader like
// ShareAcknowledge, outside any share session. Request level:
// INVALID_REQUEST for a blank group or member, UNKNOWN_MEMBER_ID when this
// node coordinates the group and the member is not in it. Per partition:
// INVALID_RECORD_STATE when a record of the range is not acquired by the
// member under a live lock (nothing changes), INVALID_REQUEST for a
// reversed range, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_ID. The wire type
// is pkg/berthmsg (docs/compatibility.md, "Berth extensions").

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/pkg/berthmsg"
)

func init() {
	registerBerth(berthmsg.AnnotateShareRecordsKey, berthmsg.AnnotateShareRecordsName, 0, 0,
		func() kmsg.Request { return berthmsg.NewAnnotateShareRecordsRequest() }, (*Broker).annotateShareRecords)
}

func (b *Broker) annotateShareRecords(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*berthmsg.AnnotateShareRecordsRequest)
	resp := r.ResponseKind().(*berthmsg.AnnotateShareRecordsResponse)
	fail := func(err error) (server.Reply, error) {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return now(resp), nil
	}
	switch {
	case b.Shares == nil: // a handler built without share-partitions (tests)
		return fail(kerr.UnknownServerError)
	case r.GroupID == "" || r.MemberID == "":
		return fail(kerr.InvalidRequest)
	case b.groupDenied(req, opRead, r.GroupID): // as ShareAcknowledge
		return fail(kerr.GroupAuthorizationFailed)
	}
	if err := b.shareMemberCheck(r.GroupID, r.MemberID); err != nil {
		return fail(err)
	}
	im := b.image()
	for _, t := range r.Topics {
		rt := berthmsg.AnnotateShareRecordsResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rp := berthmsg.AnnotateShareRecordsResponsePartition{Partition: p.Partition}
			err := func() error {
				if b.topicDenied(req, im, opRead, "", t.TopicID, true) {
					return kerr.TopicAuthorizationFailed
				}
				if _, _, err := b.sharePartition(im, t.TopicID, p.Partition); err != nil {
					return err
				}
				k := share.Key{Group: r.GroupID, TopicID: t.TopicID, Partition: p.Partition}
				return b.Shares.Annotate(k, r.MemberID, p.FirstOffset, p.LastOffset, p.ErrorText)
			}()
			rp.ErrorCode, rp.ErrorMessage = code(err), errMsg(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return now(resp), nil
}
