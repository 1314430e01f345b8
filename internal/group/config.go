package group

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/berthmq/berth/internal/metadata"
)

// Config configures a Coordinator. Field comments name the Kafka setting.
type Config struct {
	MinSessionTimeout      time.Duration // group.min.session.timeout.ms, default 6s
	MaxSessionTimeout      time.Duration // group.max.session.timeout.ms, default 30m
	InitialRebalanceDelay  time.Duration // group.initial.rebalance.delay.ms, default 3s; negative for none (Kafka's 0)
	MaxGroupSize           int           // group.max.size, default unlimited (0)
	OffsetsRetention       time.Duration // offsets.retention.minutes, default 7 days
	OffsetsTopicPartitions int32         // offsets.topic.num.partitions, default 50

	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms
	// (default 10m): how often Tick looks for expired offsets and empty
	// groups without offsets to delete.
	OffsetsRetentionCheckInterval time.Duration
	// MaxMetadataBytes is offset.metadata.max.bytes (default 4096).
	MaxMetadataBytes int

	// KIP-848 consumer groups (ConsumerGroupHeartbeat). The heartbeat
	// interval and session timeout are the broker's, not the client's.
	ConsumerHeartbeatInterval time.Duration // group.consumer.heartbeat.interval.ms, default 5s
	ConsumerSessionTimeout    time.Duration // group.consumer.session.timeout.ms, default 45s
	ConsumerMaxGroupSize      int           // group.consumer.max.size, default unlimited (0)
	// ConsumerAssignors is group.consumer.assignors (default uniform,
	// range): the server assignors members may ask for; the first is used
	// when none asks.
	ConsumerAssignors []string

	// Share groups (KIP-932, ShareGroupHeartbeat). As for consumer
	// groups, the session timeout and heartbeat interval are the
	// broker's, unless the group sets its own (ShareGroupTimeouts).
	ShareSessionTimeout    time.Duration // group.share.session.timeout.ms, default 45s
	ShareHeartbeatInterval time.Duration // group.share.heartbeat.interval.ms, default 5s
	ShareMaxGroupSize      int           // group.share.max.size, default 200
	// ShareGroupTimeouts, if set, returns a share group's own session
	// timeout and heartbeat interval (its share.session.timeout.ms and
	// share.heartbeat.interval.ms group configs over the broker's); zero
	// values, or a heartbeat not below the timeout, leave the two above.
	// It is called with the group's lock held and must only read memory.
	ShareGroupTimeouts func(group string) (session, heartbeat time.Duration)
	// ShareNewMemberID names a share member that joins without an id
	// (ShareGroupHeartbeat v0); nil: a random UUID. For tests.
	ShareNewMemberID func() string
	// OnShareMembersRemoved, if set, is called with no lock held for the
	// members that left a share group or whose session expired, once per
	// change, in order: the share partitions release what they hold. It
	// must not block.
	OnShareMembersRemoved func(group string, removed []ShareRemoval)
	// OnShareGroupDelete, if set, is called with no lock held when
	// DeleteGroups deletes a share group, once the group is marked
	// deleted (joins are refused) and before its tombstones are written:
	// it deletes the state of the group's share-partitions and calls done
	// once, from any goroutine. On an error the group is not deleted
	// (DeleteGroups answers COORDINATOR_NOT_AVAILABLE for it); on nil its
	// tombstones are written. Deleting the state first means a crash in
	// between leaves an empty group without state, never state without a
	// group that a group recreated under the same id would resume from.
	OnShareGroupDelete func(group string, done func(error))

	// Leader, if set, says what the metadata says of a partition of
	// __consumer_offsets this coordinator has not been told to load: a
	// request for one of its groups answers COORDINATOR_LOAD_IN_PROGRESS
	// when this node leads it (its load is about to begin),
	// COORDINATOR_NOT_AVAILABLE when the topic does not exist yet or the
	// partition has no leader, and NOT_COORDINATOR when another node
	// leads it (nil: always NOT_COORDINATOR). It is called with the
	// coordinator's lock held and must not call back into it.
	Leader func(p int32) metadata.Leadership

	// Now is the clock (default time.Now). Timers are driven by Tick, so
	// tests pass a fake clock and call Tick themselves.
	Now func() time.Time
	// NewMemberID makes a member id from a prefix, the client id or a
	// static member's group.instance.id (default prefix + "-" + a random
	// UUID, as Kafka). Tests make ids deterministic with it.
	NewMemberID func(prefix string) string
	Logger      *slog.Logger
}

// knownAssignors are the server-side assignors of consumer groups.
var knownAssignors = []string{"uniform", "range"}

// Defaults fills zero fields with Kafka's defaults. New calls it; since 0
// means "default", Kafka's group.initial.rebalance.delay.ms=0 is written
// as a negative InitialRebalanceDelay.
func (c *Config) Defaults() {
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = 6 * time.Second
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.InitialRebalanceDelay == 0 {
		c.InitialRebalanceDelay = 3 * time.Second
	}
	if c.OffsetsRetention == 0 {
		c.OffsetsRetention = 7 * 24 * time.Hour
	}
	if c.OffsetsTopicPartitions == 0 {
		c.OffsetsTopicPartitions = 50
	}
	if c.OffsetsRetentionCheckInterval == 0 {
		c.OffsetsRetentionCheckInterval = 10 * time.Minute
	}
	if c.MaxMetadataBytes == 0 {
		c.MaxMetadataBytes = 4096
	}
	if c.ConsumerHeartbeatInterval == 0 {
		c.ConsumerHeartbeatInterval = 5 * time.Second
	}
	if c.ConsumerSessionTimeout == 0 {
		c.ConsumerSessionTimeout = 45 * time.Second
	}
	if len(c.ConsumerAssignors) == 0 {
		c.ConsumerAssignors = []string{"uniform", "range"}
	}
	def := defaultShareGroupConfig()
	if c.ShareSessionTimeout == 0 {
		c.ShareSessionTimeout = def.SessionTimeout
	}
	if c.ShareHeartbeatInterval == 0 {
		c.ShareHeartbeatInterval = def.HeartbeatInterval
	}
	if c.ShareMaxGroupSize == 0 {
		c.ShareMaxGroupSize = def.MaxSize
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewMemberID == nil {
		c.NewMemberID = func(clientID string) string { return clientID + "-" + newUUID() }
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports settings Kafka would refuse.
func (c *Config) Validate() error {
	var errs []error
	if c.MinSessionTimeout < 0 || c.MaxSessionTimeout < c.MinSessionTimeout {
		errs = append(errs, fmt.Errorf("group.max.session.timeout.ms (%v) below group.min.session.timeout.ms (%v)", c.MaxSessionTimeout, c.MinSessionTimeout))
	}
	if c.MaxGroupSize < 0 {
		errs = append(errs, fmt.Errorf("group.max.size negative"))
	}
	if c.OffsetsRetention < 0 {
		errs = append(errs, fmt.Errorf("offsets.retention.minutes negative"))
	}
	if c.OffsetsTopicPartitions < 0 {
		errs = append(errs, fmt.Errorf("offsets.topic.num.partitions must be positive"))
	}
	if c.MaxMetadataBytes < 0 {
		errs = append(errs, fmt.Errorf("offset.metadata.max.bytes negative"))
	}
	if c.ConsumerHeartbeatInterval < 0 || c.ConsumerSessionTimeout < 0 ||
		(c.ConsumerSessionTimeout > 0 && c.ConsumerHeartbeatInterval >= c.ConsumerSessionTimeout) {
		errs = append(errs, fmt.Errorf("group.consumer.heartbeat.interval.ms (%v) must be below group.consumer.session.timeout.ms (%v)", c.ConsumerHeartbeatInterval, c.ConsumerSessionTimeout))
	}
	if c.ConsumerMaxGroupSize < 0 {
		errs = append(errs, fmt.Errorf("group.consumer.max.size negative"))
	}
	for _, a := range c.ConsumerAssignors {
		if !slices.Contains(knownAssignors, a) {
			errs = append(errs, fmt.Errorf("group.consumer.assignors: unknown assignor %q (known: %v)", a, knownAssignors))
		}
	}
	if c.ShareSessionTimeout != 0 || c.ShareHeartbeatInterval != 0 || c.ShareMaxGroupSize != 0 {
		sc := shareGroupConfig{SessionTimeout: c.ShareSessionTimeout, HeartbeatInterval: c.ShareHeartbeatInterval, MaxSize: c.ShareMaxGroupSize}
		def := defaultShareGroupConfig()
		if sc.SessionTimeout == 0 {
			sc.SessionTimeout = def.SessionTimeout
		}
		if sc.HeartbeatInterval == 0 {
			sc.HeartbeatInterval = def.HeartbeatInterval
		}
		if sc.MaxSize == 0 {
			sc.MaxSize = def.MaxSize
		}
		if err := sc.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
