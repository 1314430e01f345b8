package app

// The cluster side of a node: the Supervisor that runs the cluster
// policies while this node is the active controller (fencing silent
// brokers, electing leaders from the ISR, preferred-leader rebalance;
// internal/cluster), and the controlled shutdown a stopping broker asks
// the active controller for.

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/peer"
)

// startSupervisor runs the cluster policies in the background.
func (n *Node) startSupervisor(cfg *config.Config) error {
	sup, err := cluster.New(n.ctrl, cluster.WithLocal(n.ctrl, n.nodeID, time.Now), cluster.Config{
		SessionTimeout:                     cfg.Duration("broker.session.timeout.ms"),
		DisableAutoLeaderRebalance:         !cfg.Bool("auto.leader.rebalance.enable"),
		LeaderImbalanceCheckInterval:       time.Duration(cfg.Int("leader.imbalance.check.interval.seconds")) * time.Second,
		LeaderImbalancePerBrokerPercentage: int(cfg.Int("leader.imbalance.per.broker.percentage")),
		UncleanLeaderElection:              cfg.Bool("unclean.leader.election.enable"),
		Logger:                             n.log,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.sup, n.supStop, n.supDone = sup, cancel, make(chan struct{})
	go func() {
		defer close(n.supDone)
		if err := sup.Run(ctx); err != nil {
			n.log.Error("cluster supervisor stopped", "err", err)
		}
	}()
	return nil
}

func (n *Node) stopSupervisor() {
	if n.supStop != nil {
		n.supStop()
		<-n.supDone
		n.supStop = nil
	}
}

// controlledShutdown asks the active controller to move this broker's
// leaderships to other in-sync replicas before it stops, retrying
// controlled.shutdown.max.retries times. A single-broker cluster has
// nowhere to move them and skips it.
func (n *Node) controlledShutdown() {
	cfg := n.cfg
	if !cfg.Bool("controlled.shutdown.enable") || n.ctrl == nil || n.sup == nil {
		return
	}
	others := 0
	for id, b := range n.ctrl.Image().Brokers {
		if id != n.nodeID && !b.Fenced {
			others++
		}
	}
	if others == 0 {
		return // no other live broker could take a leadership
	}
	tries := max(int(cfg.Int("controlled.shutdown.max.retries")), 1)
	backoff := cfg.Duration("controlled.shutdown.retry.backoff.ms")
	// An attempt that takes longer than a broker session is pointless: the
	// controller fences a stopped broker after that anyway.
	timeout := cfg.Duration("broker.session.timeout.ms")
	for attempt := 1; ; attempt++ {
		asked := n.ctrl.Leader()
		if asked == 0 {
			n.log.Warn("no active controller (the metadata quorum has no leader): stopping without a controlled shutdown")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		// Give up the attempt as soon as the quorum loses its leader:
		// nothing can commit the moves then.
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
					if n.ctrl.Leader() == 0 {
						cancel()
						return
					}
				}
			}
		}()
		left, err := n.askControlledShutdown(ctx)
		close(stop)
		cancel()
		if err == nil {
			n.log.Info("controlled shutdown: leaderships moved to other replicas", "partitions_left", left)
			return
		}
		if attempt >= tries {
			n.log.Warn("controlled shutdown did not complete; stopping anyway (clients move once the controller fences this broker)",
				"attempts", attempt, "err", err)
			return
		}
		n.log.Warn("controlled shutdown attempt failed; retrying", "attempt", attempt, "err", err, "in", backoff)
		// Retry after the backoff, or as soon as another node becomes
		// the active controller (the one asked may be stopping too).
		deadline := time.Now().Add(backoff)
		for time.Now().Before(deadline) {
			if l := n.ctrl.Leader(); l != asked {
				break // a new controller, or none (the next round stops)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// askControlledShutdown runs one attempt: on the active controller itself
// through the Supervisor, otherwise with a ControlledShutdown request to
// the active controller's Kafka listener.
func (n *Node) askControlledShutdown(ctx context.Context) (int, error) {
	leader := n.ctrl.Leader()
	if leader == 0 {
		return 0, errors.New("no active controller known")
	}
	id := int32(leader - 1) // metadata.RaftID(id) = id + 1
	if id == n.nodeID {
		left, err := n.sup.ControlledShutdown(ctx, n.nodeID)
		return len(left), err
	}
	b, ok := n.ctrl.Image().Broker(id)
	if !ok {
		return 0, errors.New("the active controller's broker is not registered")
	}
	c, err := peer.DialSASL(ctx, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), "berth-broker-"+strconv.Itoa(int(n.nodeID)), n.peerDialer(), n.peerSASL)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	req := kmsg.NewPtrControlledShutdownRequest()
	req.Version = 3
	req.BrokerID = n.nodeID
	req.BrokerEpoch = -1
	kr, err := c.Request(ctx, req, 30*time.Second)
	if err != nil {
		return 0, err
	}
	resp := kr.(*kmsg.ControlledShutdownResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	return len(resp.PartitionsRemaining), nil
}
