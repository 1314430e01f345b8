package app

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/txn"
)

// newTxns makes the node's transaction coordinator from the broker's
// transaction settings; it writes __transaction_state through the
// replica path and takes producer ids from the node's blocks.
func (n *Node) newTxns(cfg *config.Config) *txn.Coordinator {
	return txn.NewCoordinator(txn.Config{
		MaxTimeout:        cfg.Duration("transaction.max.timeout.ms"),
		IDExpiration:      cfg.Duration("transactional.id.expiration.ms"),
		AbortInterval:     cfg.Duration("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
		ExpireInterval:    cfg.Duration("transaction.remove.expired.transaction.cleanup.interval.ms"),
		OffsetsPartitions: int32(cfg.Int("offsets.topic.num.partitions")),
	}, &replica.StateLog{Replicas: n.replicas, Topic: txn.Topic, NotHere: kerr.NotCoordinator, Timeout: 30 * time.Second}, txn.Runtime{
		ProducerIDs: n.pids,
		Leader:      func(p int32) metadata.Leadership { return n.ctrl.Image().Leadership(txn.Topic, p, n.nodeID) },
		Image:       n.ctrl.Image,
		Peers:       n.peers,
		Logger:      n.log,
	})
}
