package app

import (
	"log/slog"

	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/internal/sharepart"
)

// newShares makes the node's share-partition registry from the broker's
// group.share.* settings, the share coordinator's store, the share
// groups' configs and the dead-letter writer.
func (n *Node) newShares(cfg *config.Config, logger *slog.Logger) (*sharepart.Registry, error) {
	pc := share.PartitionDefaults()
	pc.LockDuration = cfg.Duration("group.share.record.lock.duration.ms")
	pc.DeliveryCountLimit = int(cfg.Int("group.share.delivery.count.limit"))
	pc.MaxRecordLocks = int(cfg.Int("group.share.partition.max.record.locks"))
	pc.Backoff.Initial = cfg.Duration("group.share.retry.backoff.initial.ms")
	pc.Backoff.Max = cfg.Duration("group.share.retry.backoff.max.ms")
	return sharepart.New(sharepart.Config{
		Partition: pc,
		Settings:  n.shareSettings(cfg, pc),
		Store:     n.shareStore(cfg),
		DLQ:       n.dlqWriter(cfg),
		Logger:    logger.With("component", "share"),
	})
}

// shareSettings resolves a share group's settings: its group configs
// over the broker defaults pc (nil: every group has pc, no DLQ topic and
// share.auto.offset.reset=latest).
func (n *Node) shareSettings(cfg *config.Config, pc share.PartitionConfig) func(group string) sharepart.GroupSettings {
	return nil
}

// dlqWriter is the writer of dead-letter topics (nil: none).
func (n *Node) dlqWriter(cfg *config.Config) sharepart.DLQWriter { return nil }
