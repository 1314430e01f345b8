package cluster

import (
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.Defaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.SessionTimeout != 9*time.Second || c.LeaderImbalanceCheckInterval != 300*time.Second ||
		c.LeaderImbalancePerBrokerPercentage != 10 || c.imbalancePercent() != 10 ||
		c.DisableAutoLeaderRebalance || c.UncleanLeaderElection || c.CheckInterval != time.Second ||
		c.MaxRecordsPerProposal != 1000 || c.Now == nil || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
	c.LeaderImbalancePerBrokerPercentage = -1 // Kafka's 0
	if err := c.Validate(); err != nil || c.imbalancePercent() != 0 {
		t.Fatalf("percentage -1: %v, effective %d", err, c.imbalancePercent())
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.SessionTimeout = -1 },
		func(c *Config) { c.LeaderImbalanceCheckInterval = -time.Second },
		func(c *Config) { c.LeaderImbalancePerBrokerPercentage = 101 },
		func(c *Config) { c.CheckInterval = -1 },
		func(c *Config) { c.MaxRecordsPerProposal = -1 },
	} {
		c := Config{}
		c.Defaults()
		bad(&c)
		if c.Validate() == nil {
			t.Errorf("invalid config accepted: %+v", c)
		}
	}
	if _, err := New(nil, nil, Config{SessionTimeout: -1}); err == nil {
		t.Error("New accepted an invalid config")
	}
}
