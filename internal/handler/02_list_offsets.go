package handler

// ListOffsets, versions 0-11: earliest (-2), latest (-1, the high
// watermark; the last stable offset with isolation_level=1, v2+, which
// also bounds -3 and timestamp lookups), max timestamp (-3, v7+), earliest local (-4, = earliest),
// latest tiered (-5) and earliest pending upload (-6) answer -1 (no tiered
// storage), and timestamp lookups. v0's OldStyleOffsets carries one offset.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(2, 0, 11, (*Broker).listOffsets) }

func (b *Broker) listOffsets(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.ListOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	im := b.image()
	for _, rt := range r.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t, terr := b.lookupTopicFor(req, im, opDescribe, rt.Topic, [16]byte{}, false)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = -1, -1, -1
			err := terr
			if err == nil {
				err = b.listOffset(t.Name, rp, &sp, r.Version, r.IsolationLevel)
			}
			if err != nil {
				sp.ErrorCode = code(err)
			}
			if r.Version == 0 && sp.ErrorCode == 0 {
				sp.OldStyleOffsets = []int64{sp.Offset}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp), nil
}

func (b *Broker) listOffset(topic string, rp kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition, version int16, isolation int8) error {
	t := b.image().Topic(topic)
	p, err := b.partition(t, rp.Partition)
	if err != nil {
		return err
	}
	if err := p.CheckEpoch(rp.CurrentLeaderEpoch); err != nil {
		return err
	}
	if !p.CaughtUpAsLeader() {
		// KIP-207: a new leader whose high watermark has not reached the
		// start of its leadership may answer below what the old leader
		// did; the client retries.
		return fmt.Errorf("%w: the new leader's high watermark is still catching up", kerr.OffsetNotAvailable)
	}
	hw := p.HighWatermark()
	if isolation == 1 {
		// read_committed: latest is the last stable offset, and lookups
		// by time stop there too, as in Kafka.
		hw = p.LastStableOffset()
	}
	sp.LeaderEpoch = p.LeaderEpoch()
	switch rp.Timestamp {
	case -2, -4:
		sp.Offset = p.LogStartOffset()
	case -1:
		sp.Offset = hw
	case -3:
		if version < 7 {
			return kerr.UnsupportedVersion
		}
		ts, off := p.MaxTimestamp()
		if off >= 0 && off < hw {
			sp.Offset, sp.Timestamp = off, ts
		}
	case -5, -6:
		// No tiered storage: nothing to report.
	default:
		if rp.Timestamp < 0 {
			return kerr.InvalidRequest
		}
		off, ts, found, err := p.OffsetForTimestamp(rp.Timestamp)
		if err != nil {
			return err
		}
		if found && off < hw {
			sp.Offset, sp.Timestamp = off, ts
		}
	}
	return nil
}
