package handler

import (
	"errors"
	"io"
	"log/slog"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/metadata"
)

// clusterImage is an image of a cluster of n voters whose brokers live
// are registered and unfenced, and dynamic broker settings dyn.
func clusterImage(n, live int, dyn map[string]string) *metadata.Image {
	im := &metadata.Image{Brokers: map[int32]metadata.Broker{}, Controllers: map[int32]string{}, BrokerConfigs: dyn}
	for id := int32(1); id <= int32(n); id++ {
		if n > 1 {
			im.Controllers[id] = "h:1"
		}
		if id <= int32(live) {
			im.Brokers[id] = metadata.Broker{ID: id, Host: "h", Port: 1}
		}
	}
	return im
}

func entryOf(es []configEntry, name string) configEntry {
	for _, e := range es {
		if e.name == name {
			return e
		}
	}
	return configEntry{}
}

// default.replication.factor is min(3, nodes) unless set; while fewer
// brokers are live than the cluster's nodes could host, creating with it
// waits (cluster.ErrBrokersDown); DescribeConfigs shows the computed value as
// DEFAULT_CONFIG, and a topic's min.insync.replicas as its partitions
// apply it.
func TestDefaultReplicationFactorFollowsTheCluster(t *testing.T) {
	b := New(Config{Broker: config.Defaults(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, tc := range []struct {
		nodes, live int
		dyn         map[string]string
		want        int32
		waits       bool
	}{
		{nodes: 1, live: 1, want: 1},
		{nodes: 2, live: 2, want: 2},
		{nodes: 3, live: 3, want: 3},
		{nodes: 5, live: 5, want: 3},
		{nodes: 3, live: 1, waits: true},
		{nodes: 3, live: 2, waits: true},
		{nodes: 3, live: 2, dyn: map[string]string{"default.replication.factor": "2"}, want: 2},
		{nodes: 3, live: 3, dyn: map[string]string{"default.replication.factor": "1"}, want: 1},
	} {
		im := clusterImage(tc.nodes, tc.live, tc.dyn)
		rf, err := b.defaultReplicationFactor(im)
		switch {
		case tc.waits && !errors.Is(err, cluster.ErrBrokersDown):
			t.Errorf("%d nodes, %d live: %d, %v; want cluster.ErrBrokersDown", tc.nodes, tc.live, rf, err)
		case tc.waits && !errors.Is(err, kerr.InvalidReplicationFactor):
			t.Errorf("%d nodes, %d live: %v is not INVALID_REPLICATION_FACTOR (CreateTopics' answer)", tc.nodes, tc.live, err)
		case !tc.waits && (err != nil || rf != tc.want):
			t.Errorf("%d nodes, %d live, %v: %d, %v; want %d", tc.nodes, tc.live, tc.dyn, rf, err, tc.want)
		}
		if tc.dyn == nil {
			want := min(3, tc.nodes)
			e := entryOf(b.brokerConfigEntries(im), "default.replication.factor")
			if e.value != strconv.Itoa(want) || e.source != config.FromDefault {
				t.Errorf("%d nodes: DescribeConfigs default.replication.factor %s (%d), want %d DEFAULT_CONFIG", tc.nodes, e.value, e.source, want)
			}
		}
	}

	im := clusterImage(3, 3, nil)
	for rf, want := range map[int]string{1: "1", 2: "1", 3: "2"} {
		e := entryOf(b.topicConfigEntries(im, nil, rf), "min.insync.replicas")
		if e.value != want || e.source != config.FromDefault {
			t.Errorf("RF %d: min.insync.replicas %s (%d), want %s DEFAULT_CONFIG", rf, e.value, e.source, want)
		}
		if s := e.synonyms[len(e.synonyms)-1]; s.value != want || s.source != config.FromDefault {
			t.Errorf("RF %d: min.insync.replicas' default synonym %+v, want %s", rf, s, want)
		}
	}
}
