package app

import (
	"testing"

	"github.com/berthmq/berth/internal/metadata"
)

// An image older than the last one reconciled changes nothing: the
// handler's propose path and the follow loop reconcile with images of
// their own, and an old one (before the internal topic existed) must not
// unload a coordinator partition a newer one loaded.
func TestPartitionLoaderIgnoresOlderImage(t *testing.T) {
	var unloaded []int32
	l := &partitionLoader{
		n:      &Node{nodeID: 1},
		topic:  "__consumer_offsets",
		unload: func(p int32) { unloaded = append(unloaded, p) },
		loaded: map[int32]bool{0: true}, // loaded from the image of index 10
	}
	withTopic := &metadata.Image{Index: 10, Topics: map[string]*metadata.Topic{
		"__consumer_offsets": {Name: "__consumer_offsets", Partitions: []metadata.Partition{{Index: 0, Leader: 1}}},
	}}
	l.reconcile(withTopic)
	l.reconcile(&metadata.Image{Index: 9}) // applied elsewhere, reconciled late
	if len(unloaded) != 0 || !l.loaded[0] {
		t.Fatalf("an older image unloaded partitions %v (loaded %v)", unloaded, l.loaded)
	}
	l.reconcile(withTopic) // the same image again (a partition not open yet retries it)
	l.reconcile(&metadata.Image{Index: 11})
	if len(unloaded) != 1 || l.loaded[0] {
		t.Fatalf("a newer image without the partition: unloaded %v (loaded %v), want [0]", unloaded, l.loaded)
	}
}
