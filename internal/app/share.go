package app

import (
	"context"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/dlq"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/internal/sharepart"
	"github.com/berthmq/berth/internal/sharestate"
	"github.com/berthmq/berth/pkg/berthmsg"
)

// sharePartitionConfig is the share-partition config of the broker's
// group.share.* settings: what a group without configs of its own gets.
func sharePartitionConfig(cfg *config.Config) share.PartitionConfig {
	pc := share.PartitionDefaults()
	pc.LockDuration = cfg.Duration(share.BrokerRecordLockDurationMs)
	pc.DeliveryCountLimit = int(cfg.Int(share.BrokerDeliveryCountLimit))
	pc.MaxRecordLocks = int(cfg.Int(share.BrokerMaxRecordLocks))
	pc.Backoff.Initial = cfg.Duration(share.BrokerRetryBackoffInitialMs)
	pc.Backoff.Multiplier = cfg.Float(share.BrokerRetryBackoffMultiplier)
	pc.Backoff.Max = cfg.Duration(share.BrokerRetryBackoffMaxMs)
	pc.Backoff.Jitter = cfg.Float(share.BrokerRetryBackoffJitter)
	return pc
}

// newShares makes the node's share-partition registry from the broker's
// share-partition config pc, the share groups' settings (the same ones
// the group coordinator reads their timeouts from), the share
// coordinator's store and the dead-letter writer.
func (n *Node) newShares(cfg *config.Config, pc share.PartitionConfig, settings *sharepart.Settings, logger *slog.Logger) (*sharepart.Registry, error) {
	n.dlq = dlq.New(dlq.Config{Broker: cfg, Image: n.ctrl.Image, Replicas: n.replicas, NodeID: n.nodeID, Logger: n.log, SASL: n.peerSASL,
		Listener: func() net.Addr {
			if n.interBroker == nil || n.interBroker.srv == nil {
				return nil
			}
			return n.interBroker.srv.Addr()
		}, Dial: n.peerDialer()})
	return sharepart.New(sharepart.Config{
		Partition: pc,
		Settings:  settings.Group,
		Store:     n.shareStore(cfg),
		DLQ:       n.dlq,
		Logger:    logger.With("component", "share"),
	})
}

// deleteShareGroup is the group coordinator's OnShareGroupDelete: the
// state of every share-partition the group may have (each partition of
// each topic; the share coordinators hold state only for those it used)
// is deleted at the share coordinators, then this node's copies are
// dropped, then every other live broker is told to drop its copies
// (BerthForgetShareGroup). A broker that cannot be told keeps a copy
// whose next write the deleted state's new state epoch fences, after
// which it loads the (empty) state again.
func (n *Node) deleteShareGroup(group string, done func(error)) {
	im := n.ctrl.Image()
	var keys []share.Key
	if im.Topic(sharestate.Topic) != nil { // else no state was ever written
		for _, name := range slices.Sorted(maps.Keys(im.Topics)) {
			t := im.Topics[name]
			for _, p := range t.Partitions {
				keys = append(keys, share.Key{Group: group, TopicID: t.ID, Partition: p.Index})
			}
		}
	}
	n.shares.DeleteGroup(group, keys, func(ctx context.Context) { n.forgetShareGroupElsewhere(ctx, im, group) }, done)
}

// forgetShareGroupElsewhere sends BerthForgetShareGroup to every other
// live broker, at once, and waits for their answers; failures are logged.
func (n *Node) forgetShareGroupElsewhere(ctx context.Context, im *metadata.Image, group string) {
	var wg sync.WaitGroup
	for _, id := range im.BrokerIDs() {
		b, _ := im.Broker(id)
		if id == n.nodeID || b.Fenced {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := berthmsg.NewForgetShareGroupRequest()
			req.GroupID = group
			addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			raw, err := n.peers.Request(ctx, addr, req, 10*time.Second)
			if err == nil {
				err = kerr.ErrorForCode(raw.(*berthmsg.ForgetShareGroupResponse).ErrorCode)
			}
			if err != nil {
				n.log.Warn("a broker was not told that a share group was deleted; its copies are fenced at their next write",
					"group", group, "broker", id, "err", err)
			}
		}()
	}
	wg.Wait()
}
