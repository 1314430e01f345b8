package app

import (
	"testing"

	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/metadata"
)

// A topic's min.insync.replicas follows its replication factor while
// nobody set it: 2 from three replicas up, else 1, counting the fewest
// replicas of any partition and, for one being reassigned, the smaller of
// its replica sets before and after. A setting at any level wins.
func TestResolveTopicMinISRFollowsReplicationFactor(t *testing.T) {
	part := func(replicas, adding, removing []int32) metadata.Partition {
		return metadata.Partition{Replicas: replicas, ISR: replicas, AddingReplicas: adding, RemovingReplicas: removing}
	}
	three := part([]int32{1, 2, 3}, nil, nil)
	for _, tc := range []struct {
		name    string
		parts   []metadata.Partition
		topic   map[string]string
		dynamic map[string]string
		static  string
		want    int
	}{
		{name: "RF 3", parts: []metadata.Partition{three}, want: 2},
		{name: "RF 5", parts: []metadata.Partition{part([]int32{1, 2, 3, 4, 5}, nil, nil)}, want: 2},
		{name: "RF 2", parts: []metadata.Partition{part([]int32{1, 2}, nil, nil)}, want: 1},
		{name: "RF 1", parts: []metadata.Partition{part([]int32{1}, nil, nil)}, want: 1},
		{name: "a partition with 2 replicas", parts: []metadata.Partition{three, part([]int32{1, 2}, nil, nil)}, want: 1},
		{name: "reassigning from 1 to 3 replicas", parts: []metadata.Partition{part([]int32{1, 2, 3}, []int32{2, 3}, nil)}, want: 1},
		{name: "reassigning from 3 to 1 replica", parts: []metadata.Partition{part([]int32{1, 2, 3}, nil, []int32{2, 3})}, want: 1},
		{name: "reassigning 3 to 3 others", parts: []metadata.Partition{part([]int32{4, 5, 6, 1, 2, 3}, []int32{4, 5, 6}, []int32{1, 2, 3})}, want: 2},
		{name: "topic override", parts: []metadata.Partition{three}, topic: map[string]string{"min.insync.replicas": "3"}, want: 3},
		{name: "dynamic broker setting", parts: []metadata.Partition{three}, dynamic: map[string]string{"min.insync.replicas": "1"}, want: 1},
		{name: "static broker setting", parts: []metadata.Partition{three}, static: "1", want: 1},
	} {
		cfg := config.Defaults()
		if tc.static != "" {
			if err := cfg.Set("min.insync.replicas", tc.static, config.SourceFile); err != nil {
				t.Fatal(err)
			}
		}
		im := &metadata.Image{
			Controllers:   map[int32]string{1: "h:1", 2: "h:2", 3: "h:3"},
			BrokerConfigs: tc.dynamic,
		}
		topic := &metadata.Topic{Name: "t", Configs: tc.topic, Partitions: tc.parts}
		if got := resolveTopic(cfg, im, topic).MinInsyncReplicas; got != tc.want {
			t.Errorf("%s: min.insync.replicas %d, want %d", tc.name, got, tc.want)
		}
	}
}
