package replica

import (
	"testing"

	"github.com/berthmq/berth/internal/metadata"
)

// unloads is a Coordinator that records the partitions it unloads.
type unloads []int32

func (u *unloads) BeginLoad(int32)                        {}
func (u *unloads) LoadRecord(int32, []byte, []byte) error { return nil }
func (u *unloads) FinishLoad(int32)                       {}
func (u *unloads) Unload(p int32)                         { *u = append(*u, p) }

// An image older than the last one reconciled changes nothing: the
// handler's propose path and the follow loop reconcile with images of
// their own, and an old one (before the internal topic existed) must not
// unload a coordinator partition a newer one loaded.
func TestPartitionLoaderIgnoresOlderImage(t *testing.T) {
	var unloaded unloads
	l := &Loader{
		self:   1,
		topic:  "__consumer_offsets",
		c:      &unloaded,
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
