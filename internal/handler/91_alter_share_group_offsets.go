package handler

// AlterShareGroupOffsets (key 91), version 0 (KIP-932): moves the start
// offset of share-partitions of an empty share group, as
// kafka-share-groups.sh --reset-offsets does (it computes the offsets
// with ListOffsets and sends them here). Served by the group's
// coordinator (NOT_COORDINATOR elsewhere). A group id no group has
// becomes an empty share group first (durably, as Kafka 4.2 does), so
// that a new group's start offsets can be set before any consumer joins;
// a group of another type answers GROUP_ID_NOT_FOUND, one with members
// NON_EMPTY_GROUP. Each share-partition's state is restarted at its new
// start offset at the share coordinator, with a new state epoch:
// in-flight records, delivery counts and retry times are forgotten, and
// a leader that still holds the old state is fenced and reloads. Per
// partition: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for a negative
// offset.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/share"
)

func init() { register(91, 0, 0, (*Broker).alterShareGroupOffsets) }

func (b *Broker) alterShareGroupOffsets(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if b.groupDenied(req, opRead, r.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp), nil
	}
	if err := b.alterableShareGroup(ctx, r.GroupID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return now(resp), nil
	}
	im := b.image()
	for _, t := range r.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		mt := im.Topic(t.Topic)
		if mt != nil {
			rt.TopicID = mt.ID
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			var err error
			switch {
			case b.topicDenied(req, im, opRead, t.Topic, [16]byte{}, false):
				err = kerr.TopicAuthorizationFailed
			case mt == nil || mt.Partition(p.Partition) == nil:
				err = fmt.Errorf("%w: %s/%d", kerr.UnknownTopicOrPartition, t.Topic, p.Partition)
			case p.StartOffset < 0:
				err = fmt.Errorf("%w: start offset %d is negative; give an offset (ListOffsets gives the earliest and latest)", kerr.InvalidRequest, p.StartOffset)
			default:
				err = b.Shares.ResetState(ctx, share.Key{Group: r.GroupID, TopicID: mt.ID, Partition: p.Partition}, p.StartOffset)
			}
			if err != nil {
				rp.ErrorCode, rp.ErrorMessage = code(err), errMsg(err)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return now(resp), nil
}

// alterableShareGroup checks, at the group's coordinator, that group is
// a share group without members, creating it (empty) when no group has
// its id.
func (b *Broker) alterableShareGroup(ctx context.Context, group string) error {
	switch {
	case group == "":
		return fmt.Errorf("%w: empty group id", kerr.InvalidGroupID)
	case b.Groups == nil || b.Shares == nil:
		return kerr.CoordinatorNotAvailable
	}
	type result struct {
		n    int
		code int16
		msg  string
	}
	done := make(chan result, 1)
	b.Groups.CreateShareGroup(group, func(n int, code int16, msg string) { done <- result{n, code, msg} })
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", kerr.RequestTimedOut, ctx.Err())
	}
	switch {
	case r.code != 0 && r.msg != "":
		return fmt.Errorf("%w: %s", kerr.ErrorForCode(r.code), r.msg)
	case r.code != 0:
		return kerr.ErrorForCode(r.code)
	case r.n > 0:
		return fmt.Errorf("%w: share group %s has %d members; stop its consumers first", kerr.NonEmptyGroup, group, r.n)
	}
	return nil
}
