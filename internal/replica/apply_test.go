package replica

import (
	"testing"
	"time"

	"github.com/berthmq/berth/internal/metadata"
)

// Opening a new topic's partitions does not block lookups of the others:
// produce and fetch keep finding their partitions while a large
// CreatePartitions or CreateTopics opens its logs.
func TestApplyDoesNotBlockLookupsWhileOpening(t *testing.T) {
	m, _, _ := openPartition(t, nil, true)
	entered, release := make(chan struct{}), make(chan struct{})
	m.openHook = func(topic string, _ int32) {
		if topic == "big" {
			close(entered)
			<-release
		}
	}
	id := [16]byte{9}
	old := [16]byte{1, 2, 3}
	im := &metadata.Image{
		Brokers: map[int32]metadata.Broker{1: {ID: 1}},
		Topics: map[string]*metadata.Topic{
			"t":   {Name: "t", ID: old, Configs: map[string]string{}, Partitions: []metadata.Partition{{Index: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}},
			"big": {Name: "big", ID: id, Configs: map[string]string{}, Partitions: []metadata.Partition{{Index: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}},
		},
	}
	done := make(chan error, 1)
	go func() { done <- m.Apply(im) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("Apply never opened the new topic")
	}
	got := make(chan *Partition, 1)
	go func() { got <- m.Get("t", 0) }()
	select {
	case p := <-got:
		if p == nil {
			t.Fatal("existing partition t-0 vanished while another topic opened")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Get blocked while Apply opened another topic's log")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m.Get("big", 0) == nil {
		t.Fatal("new topic not installed")
	}
}
