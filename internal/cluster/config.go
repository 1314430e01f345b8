package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Config configures a Supervisor. Field comments name the Kafka setting
// and its default; zero fields take the default (Defaults), so settings
// whose Kafka value can be zero or false are written the other way round.
type Config struct {
	// SessionTimeout is broker.session.timeout.ms (default 9s): a broker
	// the active controller has not heard from for this long is fenced.
	SessionTimeout time.Duration
	// DisableAutoLeaderRebalance is auto.leader.rebalance.enable=false
	// (Kafka's default is true: the zero value rebalances).
	DisableAutoLeaderRebalance bool
	// LeaderImbalanceCheckInterval is leader.imbalance.check.interval.seconds
	// (default 300s): how often the automatic rebalance looks at leaders.
	LeaderImbalanceCheckInterval time.Duration
	// LeaderImbalancePerBrokerPercentage is
	// leader.imbalance.per.broker.percentage (default 10): a broker's
	// partitions move back to it when more than this percentage of the
	// partitions it prefers are led elsewhere. Negative means Kafka's 0
	// (any imbalance).
	LeaderImbalancePerBrokerPercentage int
	// UncleanLeaderElection is the broker-level
	// unclean.leader.election.enable (default false), used for topics with
	// no override and no dynamic broker setting (UncleanEnabled).
	UncleanLeaderElection bool
	// CheckInterval is how often Run looks at brokers' liveness (default
	// 1s; Berth's, no Kafka name). A broker is fenced between
	// SessionTimeout and SessionTimeout+CheckInterval after it went
	// silent. Run also runs a round after every metadata change.
	CheckInterval time.Duration
	// MaxRecordsPerProposal bounds one metadata entry (default 1000); a
	// round with more changes proposes several entries.
	MaxRecordsPerProposal int

	// Now is the clock (default time.Now). Tick reads it once per round, so
	// tests drive the Supervisor with a fake clock and call Tick.
	Now    func() time.Time
	Logger *slog.Logger
}

// Defaults fills zero fields with the defaults.
func (c *Config) Defaults() {
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 9 * time.Second
	}
	if c.LeaderImbalanceCheckInterval == 0 {
		c.LeaderImbalanceCheckInterval = 300 * time.Second
	}
	if c.LeaderImbalancePerBrokerPercentage == 0 {
		c.LeaderImbalancePerBrokerPercentage = 10
	}
	if c.CheckInterval == 0 {
		c.CheckInterval = time.Second
	}
	if c.MaxRecordsPerProposal == 0 {
		c.MaxRecordsPerProposal = 1000
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first setting out of range.
func (c *Config) Validate() error {
	switch {
	case c.SessionTimeout <= 0:
		return fmt.Errorf("cluster: broker.session.timeout.ms %v must be positive", c.SessionTimeout)
	case c.LeaderImbalanceCheckInterval <= 0:
		return fmt.Errorf("cluster: leader.imbalance.check.interval.seconds %v must be positive", c.LeaderImbalanceCheckInterval)
	case c.LeaderImbalancePerBrokerPercentage > 100:
		return fmt.Errorf("cluster: leader.imbalance.per.broker.percentage %d above 100", c.LeaderImbalancePerBrokerPercentage)
	case c.CheckInterval <= 0:
		return errors.New("cluster: CheckInterval must be positive")
	case c.MaxRecordsPerProposal < 1:
		return errors.New("cluster: MaxRecordsPerProposal must be at least 1")
	}
	return nil
}

// imbalancePercent is the effective leader.imbalance.per.broker.percentage.
func (c *Config) imbalancePercent() int { return max(c.LeaderImbalancePerBrokerPercentage, 0) }
