package handler

// KIP-951: a NOT_LEADER_OR_FOLLOWER answer to Produce (v10+) or Fetch
// (v12+) names the partition's current leader and epoch, and (Produce v10+,
// Fetch v16+) the leader's endpoint, so the client can redirect at once
// instead of refreshing its metadata first.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
)

// leaderOf returns the current leader and epoch of a partition as the
// image has them; ok is false when the partition is unknown.
func leaderOf(im *metadata.Image, topic string, id [16]byte, part int32) (leader, epoch int32, ok bool) {
	t := im.Topic(topic)
	if t == nil {
		t = im.TopicByID(id)
	}
	mp := t.Partition(part)
	if mp == nil {
		return -1, -1, false
	}
	return mp.Leader, mp.LeaderEpoch, true
}

// endpoints collects the distinct leaders' registrations.
type endpoints struct {
	im   *metadata.Image
	seen map[int32]bool
	list []metadata.Broker
}

func (e *endpoints) add(id int32) {
	if id < 0 || e.seen[id] {
		return
	}
	if e.seen == nil {
		e.seen = map[int32]bool{}
	}
	e.seen[id] = true
	if b, ok := e.im.Broker(id); ok {
		e.list = append(e.list, b)
	}
}

func rackPtr(r string) *string {
	if r == "" {
		return nil
	}
	return &r
}

// fillProduceLeaders adds the current leaders to NOT_LEADER_OR_FOLLOWER
// partitions of a produce response.
func fillProduceLeaders(im *metadata.Image, resp *kmsg.ProduceResponse) {
	if resp.Version < 10 {
		return
	}
	eps := endpoints{im: im}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code {
				continue
			}
			if leader, epoch, ok := leaderOf(im, t.Topic, t.TopicID, p.Partition); ok && leader >= 0 {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leader, epoch
				eps.add(leader)
			}
		}
	}
	for _, b := range eps.list {
		resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: b.ID, Host: b.Host, Port: b.Port, Rack: rackPtr(b.Rack)})
	}
}

// fillFetchLeaders does the same for a fetch response.
func fillFetchLeaders(im *metadata.Image, resp *kmsg.FetchResponse) {
	if resp.Version < 12 {
		return
	}
	eps := endpoints{im: im}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code && p.ErrorCode != kerr.FencedLeaderEpoch.Code {
				continue
			}
			if leader, epoch, ok := leaderOf(im, t.Topic, t.TopicID, p.Partition); ok && leader >= 0 {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leader, epoch
				eps.add(leader)
			}
		}
	}
	if resp.Version < 16 {
		return
	}
	for _, b := range eps.list {
		resp.Brokers = append(resp.Brokers, kmsg.FetchResponseBroker{NodeID: b.ID, Host: b.Host, Port: b.Port, Rack: rackPtr(b.Rack)})
	}
}

// controllerID is the node id of the active controller (the metadata
// quorum's leader), which clients send controller requests such as
// ElectLeaders to; while no leader is known, this node, or a voter when
// this node was removed from the quorum.
func (b *Broker) controllerID() int32 {
	if l := b.Controller.Leader(); l > 0 {
		return int32(l - 1) // metadata.RaftID(id) = id + 1
	}
	if q := b.Controller.Quorum(); q.Removed {
		// Removed from the quorum: point clients at a voter, which knows
		// the active controller, never at this node.
		for _, m := range q.Members {
			if m.Voter {
				return m.NodeID
			}
		}
	}
	return b.NodeID
}
