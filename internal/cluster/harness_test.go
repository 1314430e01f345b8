package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/berthmq/berth/internal/metadata"
)

// Helpers shared by the datadriven and Supervisor tests. Images are built
// through metadata.Apply, so every image a test decides on is one the state
// machine could hold, and every decision is checked by applying it.

// applyRecs applies recs to im as one entry and fails the test on error.
func applyRecs(t testing.TB, im *metadata.Image, recs ...metadata.Record) *metadata.Image {
	t.Helper()
	next, _, err := metadata.Apply(im, im.Index+1, recs)
	if err != nil {
		t.Fatalf("apply %v: %v", recs, err)
	}
	return next
}

// emptyImage is an image with no brokers or topics.
func emptyImage(t testing.TB) *metadata.Image {
	im := &metadata.Image{
		Brokers:       map[int32]metadata.Broker{},
		Topics:        map[string]*metadata.Topic{},
		TopicIDs:      map[[16]byte]string{},
		BrokerConfigs: map[string]string{},
	}
	return applyRecs(t, im, metadata.Record{SetClusterID: &metadata.SetClusterID{ID: "AAAAAAAAAAAAAAAAAAAAAA"}})
}

func register(id int32, rack string) metadata.Record {
	return metadata.Record{RegisterBroker: &metadata.RegisterBroker{ID: id, Host: "localhost", Port: 9092 + id, Rack: rack}}
}

func fence(id int32, fenced bool) metadata.Record {
	return metadata.Record{FenceBroker: &metadata.FenceBroker{ID: id, Fenced: fenced}}
}

// topicID derives a stable topic id from the name (tests only).
func topicID(name string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	id[15] = 1
	return id
}

func createTopic(name string, replicas [][]int32, configs map[string]string) metadata.Record {
	return metadata.Record{CreateTopic: &metadata.CreateTopic{
		Name: name, ID: topicID(name), Partitions: int32(len(replicas)), Replicas: replicas, Configs: configs,
	}}
}

// ids parses a datadriven argument's values as broker ids: x=(1,2,3),
// x=1, and x=() for none.
func ids(t testing.TB, vals []string) []int32 {
	t.Helper()
	out := []int32{}
	for _, v := range vals {
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			n, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("bad broker id %q", f)
			}
			out = append(out, int32(n))
		}
	}
	return out
}

// arg returns the values of argument key, or nil when absent.
func arg(d *datadriven.TestData, key string) ([]string, bool) {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			return a.Vals, true
		}
	}
	return nil, false
}

func intArg(t testing.TB, d *datadriven.TestData, key string, def int64) int64 {
	t.Helper()
	v, ok := arg(d, key)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil {
		d.Fatalf(t, "bad %s=%q", key, v[0])
	}
	return n
}

// fmtIDs prints ids as 1,2,3 (or - for none).
func fmtIDs(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// fmtPartition prints a partition's state.
func fmtPartition(p *metadata.Partition) string {
	return fmt.Sprintf("leader=%d isr=%s replicas=%s leader-epoch=%d partition-epoch=%d",
		p.Leader, fmtIDs(p.ISR), fmtIDs(p.Replicas), p.LeaderEpoch, p.PartitionEpoch)
}

// checkPartition checks the state machine's invariants on p.
func checkPartition(t testing.TB, where string, p *metadata.Partition) {
	t.Helper()
	for i, r := range p.ISR {
		if !slices.Contains(p.Replicas, r) || slices.Contains(p.ISR[:i], r) {
			t.Fatalf("%s: ISR %v not a duplicate-free subset of replicas %v", where, p.ISR, p.Replicas)
		}
	}
	if p.Leader != metadata.NoLeader && !slices.Contains(p.ISR, p.Leader) {
		t.Fatalf("%s: leader %d not in ISR %v", where, p.Leader, p.ISR)
	}
}
