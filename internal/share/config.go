package share

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Group config names (a share group's settings, set with
// IncrementalAlterConfigs on the GROUP resource) and the broker-wide
// defaults they fall back to. The names are Kafka's (GroupConfig and
// ShareGroupConfig in Apache Kafka 4.x, KIP-932) except the retry backoff,
// which Kafka does not have: Berth follows the same pattern (share.* for
// the group, group.share.* for the broker default).
const (
	ConfigRecordLockDurationMs = "share.record.lock.duration.ms"
	ConfigDeliveryCountLimit   = "share.delivery.count.limit"
	ConfigMaxRecordLocks       = "share.partition.max.record.locks"
	ConfigAutoOffsetReset      = "share.auto.offset.reset"
	ConfigIsolationLevel       = "share.isolation.level"
	// The membership's: a member's session and heartbeat interval.
	ConfigSessionTimeoutMs    = "share.session.timeout.ms"
	ConfigHeartbeatIntervalMs = "share.heartbeat.interval.ms"

	BrokerRecordLockDurationMs = "group.share.record.lock.duration.ms"
	BrokerDeliveryCountLimit   = "group.share.delivery.count.limit"
	BrokerMaxRecordLocks       = "group.share.partition.max.record.locks"
	BrokerSessionTimeoutMs     = "group.share.session.timeout.ms"
	BrokerHeartbeatIntervalMs  = "group.share.heartbeat.interval.ms"

	// Berth additions: retry backoff of released and lock-expired records.
	ConfigRetryBackoffInitialMs  = "share.retry.backoff.initial.ms"
	ConfigRetryBackoffMultiplier = "share.retry.backoff.multiplier"
	ConfigRetryBackoffMaxMs      = "share.retry.backoff.max.ms"
	ConfigRetryBackoffJitter     = "share.retry.backoff.jitter"

	BrokerRetryBackoffInitialMs  = "group.share.retry.backoff.initial.ms"
	BrokerRetryBackoffMultiplier = "group.share.retry.backoff.multiplier"
	BrokerRetryBackoffMaxMs      = "group.share.retry.backoff.max.ms"
	BrokerRetryBackoffJitter     = "group.share.retry.backoff.jitter"
)

// PartitionConfig is one share-partition's settings, resolved from the group's
// configs and the broker defaults.
type PartitionConfig struct {
	// LockDuration is the acquisition lock (share.record.lock.duration.ms).
	LockDuration time.Duration
	// DeliveryCountLimit is the number of deliveries after which a record
	// that is released or whose lock expires is archived
	// (share.delivery.count.limit).
	DeliveryCountLimit int
	// MaxRecordLocks bounds the in-flight window [SPSO, SPEO]: no record
	// past SPEO is acquired while the window holds this many offsets
	// (share.partition.max.record.locks).
	MaxRecordLocks int
	// DeadLetter says the group has a DLQ topic
	// (errors.deadletterqueue.topic.name is not blank): rejected and
	// exhausted records go through Archiving and a DLQ action; otherwise
	// they are archived at once.
	DeadLetter bool
	// Backoff delays the redelivery of released and lock-expired records.
	Backoff Backoff
	// MaxErrorText bounds the consumer's error text kept with a record
	// awaiting its DLQ write; longer text is cut.
	MaxErrorText int
}

// Backoff is the retry delay of a record after its deliveryCount-th
// delivery failed: min(Initial * Multiplier^(deliveryCount-1), Max), then
// scaled by a factor drawn uniformly from [1-Jitter, 1+Jitter] and capped
// at Max again. Initial 0 disables it (Kafka's behaviour).
type Backoff struct {
	Initial    time.Duration
	Multiplier float64
	Max        time.Duration
	Jitter     float64
}

// PartitionDefaults returns Kafka's defaults for the KIP-932 settings and Berth's
// for the backoff (2 s, doubling, at most 5 min, ±20%).
func PartitionDefaults() PartitionConfig {
	return PartitionConfig{
		LockDuration:       30 * time.Second,
		DeliveryCountLimit: 5,
		MaxRecordLocks:     2000,
		Backoff: Backoff{
			Initial:    2 * time.Second,
			Multiplier: 2,
			Max:        5 * time.Minute,
			Jitter:     0.2,
		},
		MaxErrorText: 8 << 10,
	}
}

// ErrInvalidPartitionConfig is returned by Validate.
var ErrInvalidPartitionConfig = errors.New("share: invalid config")

// Validate checks c, with Kafka's bounds where Kafka has them.
func (c PartitionConfig) Validate() error {
	switch {
	case c.LockDuration < time.Second:
		return fmt.Errorf("%w: %s must be at least 1000", ErrInvalidPartitionConfig, ConfigRecordLockDurationMs)
	case c.DeliveryCountLimit < 2 || c.DeliveryCountLimit > math.MaxInt16:
		return fmt.Errorf("%w: %s must be in [2, %d]", ErrInvalidPartitionConfig, ConfigDeliveryCountLimit, math.MaxInt16)
	case c.MaxRecordLocks < 1:
		return fmt.Errorf("%w: %s must be positive", ErrInvalidPartitionConfig, ConfigMaxRecordLocks)
	case c.Backoff.Initial < 0 || c.Backoff.Max < c.Backoff.Initial:
		return fmt.Errorf("%w: %s must be in [0, %s]", ErrInvalidPartitionConfig, ConfigRetryBackoffInitialMs, ConfigRetryBackoffMaxMs)
	case c.Backoff.Multiplier < 1:
		return fmt.Errorf("%w: %s must be at least 1", ErrInvalidPartitionConfig, ConfigRetryBackoffMultiplier)
	case c.Backoff.Jitter < 0 || c.Backoff.Jitter > 1:
		return fmt.Errorf("%w: %s must be in [0, 1]", ErrInvalidPartitionConfig, ConfigRetryBackoffJitter)
	case c.MaxErrorText < 0:
		return fmt.Errorf("%w: MaxErrorText must not be negative", ErrInvalidPartitionConfig)
	}
	return nil
}

// Delay returns the backoff after the deliveryCount-th failed delivery; u
// is a draw from [0, 1) (0.5 means no jitter).
func (b Backoff) Delay(deliveryCount int, u float64) time.Duration {
	if b.Initial <= 0 {
		return 0
	}
	d := float64(b.Initial)
	for i := 1; i < deliveryCount && d < float64(b.Max); i++ {
		d *= b.Multiplier
	}
	d = min(d, float64(b.Max))
	d *= 1 + b.Jitter*(2*u-1)
	d = min(max(d, 0), float64(b.Max))
	return time.Duration(d).Truncate(time.Millisecond)
}
