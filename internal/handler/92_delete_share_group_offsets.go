package handler

// DeleteShareGroupOffsets (key 92), version 0 (KIP-932): forgets the
// state of an empty share group on whole topics, as
// kafka-share-groups.sh --delete-offsets does. Served by the group's
// coordinator (NOT_COORDINATOR elsewhere); the group must be a share
// group (GROUP_ID_NOT_FOUND) with no members (NON_EMPTY_GROUP). Every
// partition's state is deleted at its share coordinator; the group's
// next fetch there starts at share.auto.offset.reset. Per topic:
// UNKNOWN_TOPIC_OR_PARTITION.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/share"
)

func init() { register(92, 0, 0, (*Broker).deleteShareGroupOffsets) }

func (b *Broker) deleteShareGroupOffsets(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if b.groupDenied(req, opDelete, r.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp), nil
	}
	if err := b.emptyShareGroup(r.GroupID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return now(resp), nil
	}
	im := b.image()
	for _, t := range r.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		mt := im.Topic(t.Topic)
		var err error
		if b.topicDenied(req, im, opRead, t.Topic, [16]byte{}, false) {
			err = kerr.TopicAuthorizationFailed
		} else if mt == nil {
			err = fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, t.Topic)
		} else {
			rt.TopicID = mt.ID
			for _, p := range mt.Partitions { // every partition, even after one fails
				if perr := b.Shares.DeleteState(ctx, share.Key{Group: r.GroupID, TopicID: mt.ID, Partition: p.Index}); perr != nil && err == nil {
					err = perr
				}
			}
		}
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = code(err), errMsg(err)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return now(resp), nil
}

// emptyShareGroup checks, at the group's coordinator, that group is a
// share group without members.
func (b *Broker) emptyShareGroup(group string) error {
	switch {
	case group == "":
		return fmt.Errorf("%w: empty group id", kerr.InvalidGroupID)
	case b.Groups == nil || b.Shares == nil:
		return kerr.CoordinatorNotAvailable
	}
	n, ok, c := b.Groups.ShareGroupMembers(group)
	switch {
	case c != 0:
		return kerr.ErrorForCode(c)
	case !ok:
		return fmt.Errorf("%w: %s is not a share group", kerr.GroupIDNotFound, group)
	case n > 0:
		return fmt.Errorf("%w: share group %s has %d members; stop its consumers first", kerr.NonEmptyGroup, group, n)
	}
	return nil
}
