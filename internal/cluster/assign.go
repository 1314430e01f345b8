package cluster

import (
	"fmt"
	"slices"

	"github.com/berthmq/berth/internal/metadata"
)

// AssignRequest asks for the replica lists of new partitions.
type AssignRequest struct {
	// Topic names the topic the partitions belong to. When it exists
	// (CreatePartitions), its current partitions count in the per-topic
	// balance; for a new topic it only has to be the topic's name.
	Topic string
	// Partitions is how many replica lists to make (>= 1).
	Partitions int32
	// ReplicationFactor is the length of each list: 1..live brokers.
	ReplicationFactor int32
	// Seed picks where the placement starts among equally loaded brokers.
	// The same image, request and seed give the same assignment; Kafka
	// starts at a random broker, and so should a caller that wants new
	// topics spread when the cluster is idle (any value is valid).
	Seed int64
}

// Assign places the replicas of req.Partitions new partitions on the live
// (registered, unfenced) brokers of im and returns one replica list per
// partition, the preferred leader first. It fails with
// ErrInvalidReplicationFactor when the factor is below 1 or above the
// number of live brokers, and metadata.ErrInvalidPartitions when
// Partitions is below 1.
//
// The placement:
//
//   - Racks: brokers are ordered rack by rack in turn (the first broker of
//     each rack, then the second of each, ...), and each follower is taken
//     from a rack the partition does not use yet while there is one, so a
//     partition spans min(replication factor, racks) racks. Brokers with no
//     rack form one rack of their own ("").
//   - Balance: the leader is the broker leading the fewest partitions of
//     this topic, then holding the fewest of its replicas, then leading the
//     fewest partitions of the cluster; each follower is the allowed broker
//     with the fewest replicas of this topic, then (as the brokers leading
//     few will get a replica when they lead) leading the most of it, then
//     with the fewest replicas of the cluster. Balance within the topic
//     comes first so that one topic's partitions never pile up on a new,
//     empty broker; existing load decides among equals. A new topic's
//     preferred leaders differ by at most one between live brokers; its
//     replicas by at most one without racks and two with racks of equal
//     size (TestAssignRandom checks these bounds).
//   - Ties go to the broker nearest after a rotating start: partition i
//     starts at position Seed+i of the rack order and its followers a
//     rotating shift after the leader, so equal brokers take turns and a
//     broker's partitions do not all share the same followers.
//
// Assign reads im only; it is pure and deterministic.
func Assign(im *metadata.Image, req AssignRequest) ([][]int32, error) {
	if req.Partitions < 1 {
		return nil, fmt.Errorf("%w: %d partitions; a topic needs at least 1", metadata.ErrInvalidPartitions, req.Partitions)
	}
	if req.Partitions > metadata.MaxPartitions {
		return nil, fmt.Errorf("%w: %d partitions is more than the %d a topic may have", metadata.ErrInvalidPartitions, req.Partitions, metadata.MaxPartitions)
	}
	live := liveBrokers(im)
	if req.ReplicationFactor < 1 || int(req.ReplicationFactor) > len(live) {
		return nil, fmt.Errorf("%w: replication factor %d with %d live broker(s)", ErrInvalidReplicationFactor, req.ReplicationFactor, len(live))
	}
	pl := newPlacer(im, live, req.Topic)
	out := make([][]int32, req.Partitions)
	for i := range out {
		out[i] = pl.place(req.Seed+int64(i), int(req.ReplicationFactor))
	}
	return out, nil
}

// AssignPartitions places count new partitions of the existing topic with
// its current replication factor (that of partition 0), for
// CreatePartitions.
func AssignPartitions(im *metadata.Image, topic string, count int32, seed int64) ([][]int32, error) {
	t := im.Topic(topic)
	if t == nil || len(t.Partitions) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrUnknownPartition, topic)
	}
	rf := int32(len(t.Partitions[0].Replicas))
	return Assign(im, AssignRequest{Topic: topic, Partitions: count, ReplicationFactor: rf, Seed: seed})
}

// ValidateAssignment checks an explicit assignment (CreateTopics with
// assignments, CreatePartitions with assignments): at least one partition,
// every list non-empty and of the same length, no broker twice in a list,
// every broker registered, and at least one unfenced broker per partition
// (otherwise the partition could not have a leader). Errors wrap
// ErrInvalidReplicaAssignment.
func ValidateAssignment(im *metadata.Image, replicas [][]int32) error {
	if len(replicas) == 0 {
		return fmt.Errorf("%w: no partitions", ErrInvalidReplicaAssignment)
	}
	for i, rs := range replicas {
		if len(rs) == 0 {
			return fmt.Errorf("%w: partition %d has no replicas", ErrInvalidReplicaAssignment, i)
		}
		if len(rs) != len(replicas[0]) {
			return fmt.Errorf("%w: partition %d has %d replicas, partition 0 has %d; all must have the same replication factor",
				ErrInvalidReplicaAssignment, i, len(rs), len(replicas[0]))
		}
		anyLive := false
		for j, id := range rs {
			if slices.Contains(rs[:j], id) {
				return fmt.Errorf("%w: partition %d lists broker %d twice", ErrInvalidReplicaAssignment, i, id)
			}
			b, ok := im.Broker(id)
			if !ok {
				return fmt.Errorf("%w: partition %d names broker %d, which is not registered", ErrInvalidReplicaAssignment, i, id)
			}
			anyLive = anyLive || !b.Fenced
		}
		if !anyLive {
			return fmt.Errorf("%w: every broker of partition %d (%v) is fenced", ErrInvalidReplicaAssignment, i, rs)
		}
	}
	return nil
}

// liveBrokers returns the brokers new replicas may go to, in id order:
// registered, unfenced and not in controlled shutdown (a broker that is
// leaving, KIP-841).
func liveBrokers(im *metadata.Image) []metadata.Broker {
	var out []metadata.Broker
	for _, id := range im.BrokerIDs() {
		if b := im.Brokers[id]; !b.Fenced && !b.InControlledShutdown {
			out = append(out, b)
		}
	}
	return out
}

// rackOrder interleaves brokers by rack: the first broker (by id) of each
// rack in rack-name order, then the second of each, and so on. brokers is
// in id order.
func rackOrder(brokers []metadata.Broker) (order []int32, racks int) {
	byRack := map[string][]int32{}
	var names []string
	for _, b := range brokers {
		if _, ok := byRack[b.Rack]; !ok {
			names = append(names, b.Rack)
		}
		byRack[b.Rack] = append(byRack[b.Rack], b.ID)
	}
	slices.Sort(names)
	for round := 0; len(order) < len(brokers); round++ {
		for _, r := range names {
			if ids := byRack[r]; round < len(ids) {
				order = append(order, ids[round])
			}
		}
	}
	return order, len(names)
}

// load counts, per broker, the partitions it leads (preferred leader: the
// first replica) and the replicas it holds, in one topic and overall.
type load struct {
	topicLeaders, topicReplicas, leaders, replicas int
}

// placer carries the state of one Assign call.
type placer struct {
	order []int32 // live brokers, rack-interleaved
	pos   map[int32]int
	rack  map[int32]string
	racks int
	load  map[int32]*load
}

func newPlacer(im *metadata.Image, live []metadata.Broker, topic string) *placer {
	pl := &placer{pos: map[int32]int{}, rack: map[int32]string{}, load: map[int32]*load{}}
	pl.order, pl.racks = rackOrder(live)
	for i, id := range pl.order {
		pl.pos[id] = i
		pl.load[id] = &load{}
	}
	for _, b := range live {
		pl.rack[b.ID] = b.Rack
	}
	for name, t := range im.Topics {
		for _, p := range t.Partitions {
			for j, id := range p.Replicas {
				l := pl.load[id]
				if l == nil {
					continue // fenced or unregistered: not a candidate
				}
				l.replicas++
				if j == 0 {
					l.leaders++
				}
				if name == topic {
					l.topicReplicas++
					if j == 0 {
						l.topicLeaders++
					}
				}
			}
		}
	}
	return pl
}

// place makes one replica list of length rf; i is the partition's rotation
// index (seed + partition number).
func (pl *placer) place(i int64, rf int) []int32 {
	n := int64(len(pl.order))
	start := mod(i, n)
	// distance from start in the rotation: lower wins ties.
	dist := func(id int32, from int64) int64 { return mod(int64(pl.pos[id])-from, n) }

	leader := pl.order[0]
	for _, id := range pl.order[1:] {
		a, b := pl.load[id], pl.load[leader]
		if c := cmpInts(
			a.topicLeaders, b.topicLeaders,
			a.topicReplicas, b.topicReplicas,
			a.leaders, b.leaders,
			int(dist(id, start)), int(dist(leader, start))); c < 0 {
			leader = id
		}
	}
	rs := make([]int32, 1, rf)
	rs[0] = leader
	used := map[string]bool{pl.rack[leader]: true}

	// Followers start one rotating shift after the leader: the shift
	// changes every len(order) partitions, so a broker's partitions get
	// different followers from one round of the brokers to the next.
	shift := int64(1)
	if n > 1 {
		shift = 1 + mod(i/n, n-1)
	}
	from := int64(pl.pos[leader]) + shift
	for len(rs) < rf {
		newRack := len(used) < pl.racks
		best := int32(-1)
		for _, id := range pl.order {
			if slices.Contains(rs, id) || newRack && used[pl.rack[id]] {
				continue
			}
			if best < 0 {
				best = id
				continue
			}
			a, b := pl.load[id], pl.load[best]
			if cmpInts(
				a.topicReplicas, b.topicReplicas,
				b.topicLeaders, a.topicLeaders, // more: needs no replica as a future leader
				a.replicas, b.replicas,
				int(dist(id, from)), int(dist(best, from))) < 0 {
				best = id
			}
		}
		rs = append(rs, best)
		used[pl.rack[best]] = true
	}
	for j, id := range rs {
		l := pl.load[id]
		l.replicas++
		l.topicReplicas++
		if j == 0 {
			l.leaders++
			l.topicLeaders++
		}
	}
	return rs
}

// cmpInts compares (a0, a1, ...) with (b0, b1, ...) given as pairs
// a0, b0, a1, b1, ... lexicographically.
func cmpInts(pairs ...int) int {
	for k := 0; k+1 < len(pairs); k += 2 {
		if pairs[k] != pairs[k+1] {
			if pairs[k] < pairs[k+1] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// mod is the non-negative remainder of a / n (n > 0).
func mod(a, n int64) int64 {
	r := a % n
	if r < 0 {
		r += n
	}
	return r
}
