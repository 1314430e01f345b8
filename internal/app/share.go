package app

import (
	"log/slog"

	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/internal/sharepart"
)

// newShares makes the node's share-partition registry from the broker's
// group.share.* settings (share groups' own configs are not settable
// yet, so every group has the broker defaults and no DLQ topic).
func newShares(cfg *config.Config, logger *slog.Logger) (*sharepart.Registry, error) {
	pc := share.PartitionDefaults()
	pc.LockDuration = cfg.Duration("group.share.record.lock.duration.ms")
	pc.DeliveryCountLimit = int(cfg.Int("group.share.delivery.count.limit"))
	pc.MaxRecordLocks = int(cfg.Int("group.share.partition.max.record.locks"))
	pc.Backoff.Initial = cfg.Duration("group.share.retry.backoff.initial.ms")
	pc.Backoff.Max = cfg.Duration("group.share.retry.backoff.max.ms")
	return sharepart.New(sharepart.Config{Partition: pc, Logger: logger.With("component", "share")})
}
