package handler

// What the share-group keys that take a member's acknowledgements or
// annotations share (ShareFetch 78, ShareAcknowledge 79,
// BerthAnnotateShareRecords 32000): the member check at the group's
// coordinator and the acknowledgement batches of either request.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/share"
)

// ackBatch is an acknowledgement batch of either request.
type ackBatch struct {
	first, last int64
	types       []int8
}

// toAcks converts acknowledgement batches; RENEW (4) is valid from
// version 2 on (KIP-1222), in requests that say IsRenewAck.
func toAcks(bs []ackBatch, renewOK bool) ([]share.Ack, error) {
	out := make([]share.Ack, 0, len(bs))
	for _, b := range bs {
		a := share.Ack{First: b.first, Last: b.last, Types: make([]share.AckType, len(b.types))}
		for i, t := range b.types {
			if t < 0 || t > int8(share.AckRenew) || (t == int8(share.AckRenew) && !renewOK) {
				return nil, errInvalidAckType
			}
			a.Types[i] = share.AckType(t)
		}
		out = append(out, a)
	}
	return out, nil
}

var errInvalidAckType = errors.New("share: invalid acknowledge type")

// shareMemberCheck answers UNKNOWN_MEMBER_ID (as an error) when this
// node coordinates group and member is not in it.
func (b *Broker) shareMemberCheck(group, member string) error {
	if b.Groups == nil {
		return nil
	}
	if ok, known := b.Groups.ShareMember(group, member); known && !ok {
		return kerr.UnknownMemberID
	}
	return nil
}

// ackShare applies one partition's acknowledgements.
func (b *Broker) ackShare(im *metadata.Image, group, member string, topicID [16]byte, part int32, batches []ackBatch, renewOK bool) error {
	acks, err := toAcks(batches, renewOK)
	if err != nil {
		return err
	}
	if _, _, err := b.sharePartition(im, topicID, part); err != nil {
		return err
	}
	return b.Shares.Acknowledge(share.Key{Group: group, TopicID: topicID, Partition: part}, member, acks)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
