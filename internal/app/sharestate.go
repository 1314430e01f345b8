package app

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/internal/sharepart"
	"github.com/berthmq/berth/internal/sharestate"
)

// shareStates is the node's share coordinator (the __share_group_state
// partitions it leads), its loader, and the client share-partition
// leaders use to reach any share coordinator.
type shareStates struct {
	coord  *sharestate.Coordinator
	client *sharestate.Client
	loader *partitionLoader
}

// shareStore makes the node's share coordinator and returns the store of
// share-partition state its share-partitions use.
func (n *Node) shareStore(_ *config.Config) sharepart.Store {
	s := &shareStates{}
	s.coord = sharestate.New(n.appendShareState, n.log.With("component", "share-coordinator"))
	s.coord.Leader = func(k share.Key) metadata.Leadership {
		t := n.ctrl.Image().Topic(sharestate.Topic)
		if t == nil {
			return metadata.LeaderNone
		}
		return n.leadership(sharestate.Topic, sharestate.PartitionFor(k, int32(len(t.Partitions))))
	}
	s.client = &sharestate.Client{Self: n.nodeID, Local: s.coord, Route: n.routeShareState, Peers: n.peers}
	s.loader = &partitionLoader{n: n, topic: sharestate.Topic, what: "share-partition state", loaded: map[int32]bool{},
		begin: s.coord.BeginLoad, finish: s.coord.FinishLoad, unload: s.coord.Unload, partitions: s.coord.SetPartitions,
		record: func(p int32, key, value []byte) {
			if err := s.coord.LoadRecord(p, key, value); err != nil {
				n.log.Warn("skipping __share_group_state record", "partition", p, "err", err)
			}
		}}
	n.states = s
	return s.client
}

func (s *shareStates) close() {
	s.loader.wg.Wait()
}

// reconcileLoaders loads and unloads the coordinators' partitions after a
// metadata change, and drops the share-partitions of deleted topics.
func (n *Node) reconcileLoaders(im *metadata.Image) {
	if n.shares != nil {
		// The newest image: a caller with an older one must not forget a
		// topic created since.
		latest := n.ctrl.Image()
		n.shares.ForgetTopics(func(id [16]byte) bool { return latest.TopicByID(id) != nil })
	}
	n.loader.reconcile(im)
	if n.states != nil {
		n.states.loader.reconcile(im)
	}
	if n.txns != nil {
		n.txns.loader.reconcile(im)
	}
}

// appendShareState appends a record to a local __share_group_state
// partition; the wait returns once every in-sync replica has it, or
// fails after the share-partition leader's own timeout (10 s).
func (n *Node) appendShareState(p int32, key, value []byte) (func() error, error) {
	part := n.replicas.Get(sharestate.Topic, p)
	if part == nil {
		return nil, sharestate.ErrNotCoordinator
	}
	res, err := part.Append(batch.Build([]batch.KV{{Key: key, Value: value}}, time.Now().UnixMilli()), nil)
	if err != nil {
		return nil, err
	}
	return func() error {
		return part.WaitDurable(res.Durable, res.Gen, time.Now().Add(10*time.Second), true)
	}, nil
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
