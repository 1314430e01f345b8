package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A stock Kafka server.properties loads: known keys apply (broker.id is
// node.id), unknown ones are reported, bad values fail; the environment
// beats the file and flags beat both.
func TestPrecedenceFileEnvFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.properties")
	props := "# Kafka's sample\nbroker.id=7\nnum.network.threads=3\nlog.dirs=/from/file\nnum.partitions=4\nzookeeper.connect=localhost:2181\n"
	if err := os.WriteFile(path, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Defaults()
	ignored, err := c.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ignored, ",") != "num.network.threads,zookeeper.connect" {
		t.Fatalf("ignored %v", ignored)
	}
	if c.Int("node.id") != 7 || c.Get("log.dirs") != "/from/file" || c.Int("num.partitions") != 4 {
		t.Fatalf("file values not applied: %v", c.All())
	}
	if err := c.LoadEnv([]string{"BERTH_LOG_DIRS=/from/env", "BERTH_NUM_PARTITIONS=5", "PATH=/bin"}); err != nil {
		t.Fatal(err)
	}
	if c.Get("log.dirs") != "/from/env" || c.Int("num.partitions") != 5 {
		t.Fatalf("env did not win: %v", c.All())
	}
	if err := c.Set("num.partitions", "6", SourceFlag); err != nil || c.Int("num.partitions") != 6 {
		t.Fatalf("flag did not win: %v", err)
	}
	if err := c.LoadEnv([]string{"BERTH_NUM_PARTITIONS=zero"}); err == nil {
		t.Fatal("a non-numeric num.partitions from the environment was accepted")
	}
	bad := filepath.Join(t.TempDir(), "bad.properties")
	os.WriteFile(bad, []byte("num.partitions=-3\n"), 0o644)
	if _, err := Defaults().LoadFile(bad); err == nil || !strings.Contains(err.Error(), "bad.properties:1") {
		t.Fatalf("bad value: %v", err)
	}
}

// Topic settings resolve: topic override, dynamic broker default, static
// broker setting, built-in default.
func TestResolveTopic(t *testing.T) {
	c := Defaults()
	if v, src := c.ResolveTopic("retention.ms", nil, nil, Cluster{}); v != "604800000" || src != FromDefault {
		t.Fatalf("default: %s %d", v, src)
	}
	c.Set("log.retention.ms", "1000", SourceFlag)
	if v, src := c.ResolveTopic("retention.ms", nil, nil, Cluster{}); v != "1000" || src != FromStaticBroker {
		t.Fatalf("static: %s %d", v, src)
	}
	if v, src := c.ResolveTopic("retention.ms", nil, map[string]string{"log.retention.ms": "2000"}, Cluster{}); v != "2000" || src != FromDynamicBroker {
		t.Fatalf("dynamic: %s %d", v, src)
	}
	if v, src := c.ResolveTopic("retention.ms", map[string]string{"retention.ms": "3000"}, map[string]string{"log.retention.ms": "2000"}, Cluster{}); v != "3000" || src != FromTopic {
		t.Fatalf("topic: %s %d", v, src)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Set("listeners", "SASL_SSL://127.0.0.1:9093", SourceFlag)
	if err := c.Validate(); err == nil {
		t.Fatal("SASL_SSL listener accepted")
	}
}

// The durable defaults: default.replication.factor is min(3, nodes) and
// min.insync.replicas 2 from a replication factor of 3 up, while nobody
// set them; a setting at any level wins, and so does a topic override.
func TestDurableDefaults(t *testing.T) {
	c := Defaults()
	for _, tc := range []struct {
		nodes int
		want  string
	}{{0, "1"}, {1, "1"}, {2, "2"}, {3, "3"}, {5, "3"}} {
		if v, src := c.ResolveBrokerIn("default.replication.factor", nil, Cluster{Nodes: tc.nodes}); v != tc.want || src != FromDefault {
			t.Errorf("default.replication.factor on %d nodes: %s (source %d), want %s DEFAULT_CONFIG", tc.nodes, v, src, tc.want)
		}
	}
	for _, tc := range []struct {
		rf   int
		want string
	}{{0, "1"}, {1, "1"}, {2, "1"}, {3, "2"}, {5, "2"}} {
		if v, src := c.ResolveTopic("min.insync.replicas", nil, nil, Cluster{Nodes: 5, ReplicationFactor: tc.rf}); v != tc.want || src != FromDefault {
			t.Errorf("min.insync.replicas at RF %d: %s (source %d), want %s DEFAULT_CONFIG", tc.rf, v, src, tc.want)
		}
	}
	three := Cluster{Nodes: 3, ReplicationFactor: 3}
	if v, src := c.ResolveTopic("min.insync.replicas", nil, map[string]string{"min.insync.replicas": "1"}, three); v != "1" || src != FromDynamicBroker {
		t.Errorf("dynamic min.insync.replicas: %s %d", v, src)
	}
	if v, src := c.ResolveTopic("min.insync.replicas", map[string]string{"min.insync.replicas": "3"}, nil, three); v != "3" || src != FromTopic {
		t.Errorf("topic min.insync.replicas: %s %d", v, src)
	}
	if v, src := c.ResolveBrokerIn("default.replication.factor", map[string]string{"default.replication.factor": "2"}, three); v != "2" || src != FromDynamicBroker {
		t.Errorf("dynamic default.replication.factor: %s %d", v, src)
	}
	c.Set("min.insync.replicas", "1", SourceFile)
	c.Set("default.replication.factor", "1", SourceFile)
	if v, src := c.ResolveTopic("min.insync.replicas", nil, nil, three); v != "1" || src != FromStaticBroker {
		t.Errorf("static min.insync.replicas: %s %d", v, src)
	}
	if v, src := c.ResolveBrokerIn("default.replication.factor", nil, three); v != "1" || src != FromStaticBroker {
		t.Errorf("static default.replication.factor: %s %d", v, src)
	}
}

// Kafka's retention and roll settings in hours or minutes become the
// millisecond settings, the most precise form given winning.
func TestLoadFileCoarseUnits(t *testing.T) {
	for _, tc := range []struct {
		file         string
		retain, roll string
	}{
		{"log.retention.hours=24\n", "86400000", "604800000"},
		{"log.retention.hours=24\nlog.retention.minutes=90\n", "5400000", "604800000"},
		{"log.retention.ms=1000\nlog.retention.hours=24\n", "1000", "604800000"},
		{"log.retention.hours=-1\nlog.roll.hours=2\n", "-1", "7200000"},
	} {
		path := filepath.Join(t.TempDir(), "server.properties")
		if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		c := Defaults()
		ignored, err := c.LoadFile(path)
		if err != nil || len(ignored) != 0 {
			t.Fatalf("%q: %v, ignored %v", tc.file, err, ignored)
		}
		if got := c.Get("log.retention.ms"); got != tc.retain {
			t.Errorf("%q: log.retention.ms %s, want %s", tc.file, got, tc.retain)
		}
		if got := c.Get("log.roll.ms"); got != tc.roll {
			t.Errorf("%q: log.roll.ms %s, want %s", tc.file, got, tc.roll)
		}
	}
}
