package app

import (
	"log/slog"
	"sync"

	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/internal/sharepart"
)

// newShares makes the node's share-partition registry from the broker's
// group.share.* settings, the share coordinator's store, the share
// groups' configs and the dead-letter writer.
func (n *Node) newShares(cfg *config.Config, logger *slog.Logger) (*sharepart.Registry, error) {
	pc := share.PartitionDefaults()
	pc.LockDuration = cfg.Duration(share.BrokerRecordLockDurationMs)
	pc.DeliveryCountLimit = int(cfg.Int(share.BrokerDeliveryCountLimit))
	pc.MaxRecordLocks = int(cfg.Int(share.BrokerMaxRecordLocks))
	pc.Backoff.Initial = cfg.Duration(share.BrokerRetryBackoffInitialMs)
	pc.Backoff.Multiplier = cfg.Float(share.BrokerRetryBackoffMultiplier)
	pc.Backoff.Max = cfg.Duration(share.BrokerRetryBackoffMaxMs)
	pc.Backoff.Jitter = cfg.Float(share.BrokerRetryBackoffJitter)
	return sharepart.New(sharepart.Config{
		Partition: pc,
		Settings:  n.shareSettings(cfg, pc),
		Store:     n.shareStore(cfg),
		DLQ:       n.dlqWriter(cfg),
		Logger:    logger.With("component", "share"),
	})
}

// shareSettings resolves a share group's settings: its group configs
// (the GROUP config resource, in the metadata image) over the broker
// settings, dynamic then static. It runs on every share-partition load
// and every ShareFetch, so it only reads the in-memory image. Settings
// that fail validation (only a group config set under other broker
// bounds can) fall back to the broker defaults pc, keeping the group's
// dead-letter topic, share.auto.offset.reset and share.isolation.level.
// Resolved settings are cached per metadata image (a new image, after
// any metadata change, starts a new cache).
func (n *Node) shareSettings(cfg *config.Config, pc share.PartitionConfig) func(group string) sharepart.GroupSettings {
	var (
		mu     sync.Mutex
		cached *metadata.Image
		byName map[string]sharepart.GroupSettings
	)
	return func(group string) sharepart.GroupSettings {
		im := n.ctrl.Image()
		mu.Lock()
		if cached != im {
			cached, byName = im, map[string]sharepart.GroupSettings{}
		}
		s, ok := byName[group]
		mu.Unlock()
		if ok {
			return s
		}
		g, err := cfg.ShareGroup(im.GroupConfig(group), im.BrokerConfigs)
		if err != nil {
			g.Partition = pc
			g.Partition.DeadLetter = g.DLQTopic != ""
		}
		s = sharepart.GroupSettings{Partition: g.Partition, DLQTopic: g.DLQTopic, AutoOffsetReset: g.AutoOffsetReset,
			ReadCommitted: g.IsolationLevel == config.ReadCommitted}
		mu.Lock()
		if cached == im {
			byName[group] = s
		}
		mu.Unlock()
		return s
	}
}
