package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
)

func TestParseConfigs(t *testing.T) {
	got, err := parseConfigs([]string{"retention.ms=1000", " cleanup.policy = compact,delete ", "empty="})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"retention.ms": "1000", "cleanup.policy": "compact,delete", "empty": ""}
	if len(got) != len(want) {
		t.Fatalf("got %d configs, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] == nil || *got[k] != v {
			t.Errorf("%s = %v, want %q", k, got[k], v)
		}
	}
	for _, bad := range [][]string{{"noequals"}, {"=v"}, {"a=1", "a=2"}} {
		if _, err := parseConfigs(bad); err == nil {
			t.Errorf("parseConfigs(%q) succeeded", bad)
		}
	}
	if m, err := parseConfigs(nil); m != nil || err != nil {
		t.Errorf("parseConfigs(nil) = %v, %v", m, err)
	}
}

func TestBuildAlter(t *testing.T) {
	alters, res, err := buildAlter("t", []string{"retention.ms=5", "a.b=c"}, []string{"cleanup.policy"})
	if err != nil {
		t.Fatal(err)
	}
	want := []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "a.b", Value: kadm.StringPtr("c")},
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("5")},
		{Op: kadm.DeleteConfig, Name: "cleanup.policy"},
	}
	if !reflect.DeepEqual(alters, want) {
		t.Errorf("alters = %+v, want %+v", alters, want)
	}
	if res.SetConfigs["retention.ms"] != "5" || !slices.Equal(res.DeleteConfigs, []string{"cleanup.policy"}) {
		t.Errorf("result = %+v", res)
	}
	if _, _, err := buildAlter("t", []string{"a=1"}, []string{"a"}); err == nil {
		t.Error("the same key set and deleted was accepted")
	}
	if _, _, err := buildAlter("t", nil, []string{" "}); err == nil {
		t.Error("an empty --delete-config was accepted")
	}

	var b bytes.Buffer
	printTopicAlter(&b, topicAlterResult{Topic: "t", Partitions: 6, SetConfigs: res.SetConfigs, DeleteConfigs: res.DeleteConfigs})
	if want := "Altered topic t: partitions now 6; set a.b=c; set retention.ms=5; deleted cleanup.policy.\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestTopicConfigEntriesKeepsNonDefaults(t *testing.T) {
	cs := []kadm.Config{
		{Key: "segment.bytes", Value: kadm.StringPtr("1073741824"), Source: kmsg.ConfigSourceDefaultConfig},
		{Key: "retention.ms", Value: kadm.StringPtr("1000"), Source: kmsg.ConfigSourceDynamicTopicConfig},
		{Key: "min.insync.replicas", Value: kadm.StringPtr("2"), Source: kmsg.ConfigSourceStaticBrokerConfig},
		{Key: "sasl.secret", Source: kmsg.ConfigSourceDynamicTopicConfig, Sensitive: true},
	}
	got := topicConfigEntries(cs, false)
	want := []configEntry{
		{Name: "min.insync.replicas", Value: "2", Source: "STATIC_BROKER_CONFIG"},
		{Name: "retention.ms", Value: "1000", Source: "DYNAMIC_TOPIC_CONFIG"},
		{Name: "sasl.secret", Value: "(sensitive)", Source: "DYNAMIC_TOPIC_CONFIG", Sensitive: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if n := len(topicConfigEntries(cs, true)); n != 4 {
		t.Errorf("--all-configs kept %d configs, want 4", n)
	}
}

func sampleDescriptions() []topicDescription {
	return []topicDescription{
		{
			Topic: "orders", ID: "CsMkRqZWqlEGAIT7J3TwoQ", ReplicationFactor: 3, MinInsyncReplicas: 2,
			Partitions: []partitionDescription{
				{Partition: 0, Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, LogStartOffset: 0, EndOffset: 1200},
				{Partition: 1, Leader: -1, LeaderEpoch: 7, Replicas: []int32{2, 3, 1}, ISR: []int32{}, LogStartOffset: -1, EndOffset: -1, Error: "LEADER_NOT_AVAILABLE"},
			},
			Configs: []configEntry{{Name: "retention.ms", Value: "3600000", Source: "DYNAMIC_TOPIC_CONFIG"}},
		},
		{Topic: "nope", Partitions: []partitionDescription{}, Configs: []configEntry{}, Error: "UNKNOWN_TOPIC_OR_PARTITION"},
	}
}

func TestPrintTopicDescriptions(t *testing.T) {
	var b bytes.Buffer
	if err := printTopicDescriptions(&b, sampleDescriptions()); err != nil {
		t.Fatal(err)
	}
	want := `Topic: orders  ID: CsMkRqZWqlEGAIT7J3TwoQ  Partitions: 2  Replication factor: 3  Min in-sync replicas: 2
PARTITION  LEADER                       EPOCH  REPLICAS  ISR    LOG-START-OFFSET  END-OFFSET
0          1                            4      1,2,3     1,2,3  0                 1200
1          none (LEADER_NOT_AVAILABLE)  7      2,3,1            -                 -

CONFIG        VALUE    SOURCE
retention.ms  3600000  DYNAMIC_TOPIC_CONFIG

Topic: nope  Error: UNKNOWN_TOPIC_OR_PARTITION
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestTopicDescribeJSONShape(t *testing.T) {
	var b bytes.Buffer
	if err := writeJSON(&b, sampleDescriptions()); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	if k := keys(got[0]); !slices.Equal(k, []string{"configs", "id", "internal", "min_insync_replicas", "partitions", "replication_factor", "topic"}) {
		t.Errorf("topic keys = %v", k)
	}
	p0 := got[0]["partitions"].([]any)[0].(map[string]any)
	if k := keys(p0); !slices.Equal(k, []string{"end_offset", "isr", "leader", "leader_epoch", "log_start_offset", "partition", "replicas"}) {
		t.Errorf("partition keys = %v", k)
	}
	if got[1]["error"] != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("missing topic error = %v", got[1]["error"])
	}
}

func TestPrintTopicListAndCreate(t *testing.T) {
	var b bytes.Buffer
	printTopicList(&b, []topicListEntry{{Topic: "a", Partitions: 3, ReplicationFactor: 1}, {Topic: "__consumer_offsets", Partitions: 50, ReplicationFactor: 1, Internal: true}}, true)
	want := "TOPIC               PARTITIONS  REPLICATION-FACTOR  INTERNAL\n" +
		"a                   3           1                   false\n" +
		"__consumer_offsets  50          1                   true\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	printTopicList(&b, nil, false)
	if !strings.Contains(b.String(), "berth topic create") {
		t.Errorf("empty list should say how to create a topic: %q", b.String())
	}

	for _, tc := range []struct {
		r    topicCreateResult
		want string
	}{
		{topicCreateResult{Topic: "t", Partitions: 3, ReplicationFactor: 1, MinInsyncReplicas: 1, Created: true}, "Created topic t (3 partitions, replication factor 1).\n"},
		{topicCreateResult{Topic: "t", Partitions: 3, ReplicationFactor: 3, MinInsyncReplicas: 2, Created: true}, "Created topic t (3 partitions, replication factor 3, min.insync.replicas 2).\n"},
		{topicCreateResult{Topic: "t", Partitions: -1, ReplicationFactor: -1, Created: true}, "Created topic t (default partitions, replication factor default).\n"},
		{topicCreateResult{Topic: "t", AlreadyExisted: true}, "Topic t already exists.\n"},
		{topicCreateResult{Topic: "t", Partitions: 1, ReplicationFactor: 1, ValidateOnly: true}, "Topic t can be created (1 partition, replication factor 1); nothing was created (--validate-only).\n"},
	} {
		b.Reset()
		printTopicCreate(&b, tc.r)
		if b.String() != tc.want {
			t.Errorf("got %q, want %q", b.String(), tc.want)
		}
	}
}

// TestTopicFlagErrorsBeforeConnecting checks that bad flags fail without a
// broker (the bootstrap address is closed, so reaching it would fail
// differently).
func TestTopicFlagErrorsBeforeConnecting(t *testing.T) {
	addr := closedPort(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"topic", "create"}, "accepts 1 arg"},
		{[]string{"topic", "create", "t", "--partitions", "0"}, "--partitions 0"},
		{[]string{"topic", "create", "t", "--replication-factor", "0"}, "--replication-factor 0"},
		{[]string{"topic", "create", "t", "--config", "x"}, "want key=value"},
		{[]string{"topic", "alter", "t"}, "nothing to alter"},
		{[]string{"topic", "alter", "t", "--partitions", "0"}, "--partitions 0"},
		{[]string{"topic", "describe"}, "requires at least 1 arg"},
		{[]string{"topic", "delete"}, "requires at least 1 arg"},
	} {
		_, _, err := runCLI(t, "", append(tc.args, "-b", addr)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// TestIntegrationTopicRoundTrip creates, describes, alters and deletes a
// topic through the CLI against a running broker.
func TestIntegrationTopicRoundTrip(t *testing.T) {
	addr := integrationBootstrap(t)
	topic := uniqueTopic(t)
	run := func(args ...string) string {
		t.Helper()
		out, errOut, err := runCLI(t, "", append(args, "-b", addr)...)
		if err != nil {
			t.Fatalf("berth %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	describe := func() topicDescription {
		t.Helper()
		var ds []topicDescription
		if err := json.Unmarshal([]byte(run("topic", "describe", topic, "--json")), &ds); err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1 || ds[0].Topic != topic {
			t.Fatalf("describe returned %+v", ds)
		}
		return ds[0]
	}
	configValue := func(d topicDescription, name string) (string, bool) {
		for _, c := range d.Configs {
			if c.Name == name {
				return c.Value, true
			}
		}
		return "", false
	}

	var created topicCreateResult
	if err := json.Unmarshal([]byte(run("topic", "create", topic, "--partitions", "2", "--config", "retention.ms=3600000", "--json")), &created); err != nil {
		t.Fatal(err)
	}
	if !created.Created || created.Partitions != 2 {
		t.Fatalf("create result %+v", created)
	}
	if _, _, err := runCLI(t, "", "topic", "create", topic, "-b", addr); err == nil || !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Errorf("second create: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if out := run("topic", "create", topic, "--if-not-exists"); !strings.Contains(out, "already exists") {
		t.Errorf("create --if-not-exists printed %q", out)
	}
	if out := run("topic", "list"); !strings.Contains(out, topic) {
		t.Errorf("list does not show %s:\n%s", topic, out)
	}

	poll.Until(t, 10*time.Second, func() error {
		d := describe()
		if len(d.Partitions) != 2 {
			return fmt.Errorf("describe: %d partitions, want 2", len(d.Partitions))
		}
		for _, p := range d.Partitions {
			if p.Leader < 0 || len(p.Replicas) == 0 || p.EndOffset != 0 || p.LogStartOffset != 0 {
				return fmt.Errorf("partition %+v: want a leader, replicas and offsets 0/0", p)
			}
		}
		if v, ok := configValue(d, "retention.ms"); !ok || v != "3600000" {
			return fmt.Errorf("retention.ms = %q (%v), want 3600000", v, ok)
		}
		return nil
	})

	run("topic", "alter", topic, "--partitions", "3", "--config", "retention.ms=7200000", "--config", "cleanup.policy=compact")
	poll.Until(t, 10*time.Second, func() error {
		d := describe()
		if len(d.Partitions) != 3 {
			return fmt.Errorf("after alter: %d partitions, want 3", len(d.Partitions))
		}
		if v, _ := configValue(d, "retention.ms"); v != "7200000" {
			return fmt.Errorf("after alter: retention.ms = %q, want 7200000", v)
		}
		if v, _ := configValue(d, "cleanup.policy"); v != "compact" {
			return fmt.Errorf("after alter: cleanup.policy = %q, want compact", v)
		}
		return nil
	})
	run("topic", "alter", topic, "--delete-config", "cleanup.policy")
	poll.Until(t, 10*time.Second, func() error {
		if v, ok := configValue(describe(), "cleanup.policy"); ok && v == "compact" {
			return errors.New("cleanup.policy still compact after --delete-config")
		}
		return nil
	})

	run("topic", "delete", topic)
	poll.Until(t, 10*time.Second, func() error {
		_, _, err := runCLI(t, "", "topic", "describe", topic, "-b", addr)
		if err == nil || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
			return fmt.Errorf("describe after delete: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
		}
		return nil
	})
	run("topic", "delete", topic, "--if-exists")
}
