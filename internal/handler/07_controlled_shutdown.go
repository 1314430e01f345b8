package handler

// ControlledShutdown, versions 1-3: a broker about to stop asks the active
// controller to move its leaderships to other in-sync replicas and fence
// it (Kafka served it in ZooKeeper mode; KRaft brokers say it in their
// heartbeats). Berth brokers send it to the active controller from
// `berth serve`'s shutdown (internal/app); any node that is not the
// active controller answers NOT_CONTROLLER. The response lists the
// partitions whose leadership could not move (no other in-sync replica).
// Version 0 (no header client id) is not served.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(7, 1, 3, (*Broker).controlledShutdown) }

// ShutdownController moves a broker's leaderships away and fences it;
// cluster.Supervisor implements it on the active controller.
type ShutdownController interface {
	ControlledShutdown(ctx context.Context, brokerID int32) ([]cluster.TopicPartition, error)
}

func (b *Broker) controlledShutdown(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.ControlledShutdownRequest)
	resp := r.ResponseKind().(*kmsg.ControlledShutdownResponse)
	if !b.authorizedCluster(req, opClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return now(resp), nil
	}
	if b.Shutdowns == nil || !b.Controller.IsLeader() {
		resp.ErrorCode = kerr.NotController.Code
		return now(resp), nil
	}
	if _, ok := b.image().Broker(r.BrokerID); !ok {
		resp.ErrorCode = kerr.BrokerNotAvailable.Code
		return now(resp), nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	left, err := b.Shutdowns.ControlledShutdown(ctx, r.BrokerID)
	switch {
	case errors.Is(err, metadata.ErrNotLeader):
		resp.ErrorCode = kerr.NotController.Code
	case err != nil:
		resp.ErrorCode = code(err)
		b.log.Warn("controlled shutdown failed", "broker", r.BrokerID, "err", err)
	default:
		b.log.Info("controlled shutdown: leaderships moved", "broker", r.BrokerID, "remaining", len(left))
	}
	for _, tp := range left {
		p := kmsg.NewControlledShutdownResponsePartitionsRemaining()
		p.Topic, p.Partition = tp.Topic, tp.Partition
		resp.PartitionsRemaining = append(resp.PartitionsRemaining, p)
	}
	return now(resp), nil
}
