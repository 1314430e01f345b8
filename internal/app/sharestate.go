package app

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/internal/sharepart"
	"github.com/berthmq/berth/internal/sharestate"
)

// shareStore makes the node's share coordinator (the __share_group_state
// partitions it leads) and returns the client share-partition leaders use
// to reach any share coordinator.
func (n *Node) shareStore(_ *config.Config) sharepart.Store {
	states := &replica.StateLog{Replicas: n.replicas, Topic: sharestate.Topic, NotHere: sharestate.ErrNotCoordinator,
		Timeout: 10 * time.Second} // the share-partition leader's own timeout
	n.states = sharestate.New(states, n.log.With("component", "share-coordinator"))
	n.states.Leader = func(k share.Key) metadata.Leadership {
		im := n.ctrl.Image()
		t := im.Topic(sharestate.Topic)
		if t == nil {
			return metadata.LeaderNone
		}
		return im.Leadership(sharestate.Topic, sharestate.PartitionFor(k, int32(len(t.Partitions))), n.nodeID)
	}
	return &sharestate.Client{Self: n.nodeID, Local: n.states, Route: n.routeShareState, Peers: n.peers}
}

// forgetDeletedTopics drops the share-partitions of deleted topics, after
// a metadata change (replica.Loaders.Before).
func (n *Node) forgetDeletedTopics(*metadata.Image) {
	if n.shares != nil {
		// The newest image: a caller with an older one must not forget a
		// topic created since.
		latest := n.ctrl.Image()
		n.shares.ForgetTopics(func(id [16]byte) bool { return latest.TopicByID(id) != nil })
	}
}

// routeShareState finds the share coordinator of k, creating
// __share_group_state on first use.
func (n *Node) routeShareState(ctx context.Context, k share.Key) (int32, string, error) {
	t, err := n.topics.EnsureInternal(ctx, cluster.ShareStateTopic)
	if err != nil {
		return 0, "", err
	}
	p := t.Partition(sharestate.PartitionFor(k, int32(len(t.Partitions))))
	if p == nil || p.Leader == metadata.NoLeader {
		return 0, "", fmt.Errorf("%w: no leader for the share-partition's %s partition", kerr.CoordinatorNotAvailable, sharestate.Topic)
	}
	if p.Leader == n.nodeID {
		return p.Leader, "", nil
	}
	b, ok := n.ctrl.Image().Broker(p.Leader)
	if !ok {
		return 0, "", fmt.Errorf("%w: share coordinator %d unknown", kerr.CoordinatorNotAvailable, p.Leader)
	}
	return p.Leader, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), nil
}
