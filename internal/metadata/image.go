package metadata

import "slices"

// Image is the cluster metadata as of one applied Raft entry. An Image and
// everything reachable from it (maps, *Topic, slices) is immutable: readers
// share it without locks and must never modify it. Apply builds the next
// Image copy-on-write, reusing the unchanged parts.
type Image struct {
	Index     uint64 // Raft index of the last applied entry
	ClusterID string // "" until a SetClusterID record applies
	Brokers   map[int32]Broker
	Topics    map[string]*Topic   // by name
	TopicIDs  map[[16]byte]string // topic id -> name
	// BrokerConfigs are the dynamic cluster-wide broker config overrides
	// (AlterConfigs / IncrementalAlterConfigs on the broker resource).
	BrokerConfigs map[string]string
	// GroupConfigs are the group config overrides (the GROUP resource) by
	// group id; groups with none are absent. The inner maps are never
	// empty.
	GroupConfigs map[string]map[string]string
	// ClientQuotas are the client quota values by entity (quota.go);
	// entities with none are absent.
	ClientQuotas map[QuotaEntity]map[string]float64
	// NextProducerID is the first producer id not yet handed out in a
	// ProducerIDBlock.
	NextProducerID int64
	// Controllers maps the Kafka node id of every member of the metadata
	// quorum (voters and observers) whose Raft address is known to that
	// address, host:port. It changes only through Raft configuration
	// changes (see quorum.go); a one-voter cluster that never had an
	// address configured has none.
	Controllers map[int32]string
	// ACLs are the ACL bindings (acl.go); nil: none.
	ACLs *ACLs
	// ScramUsers are the SCRAM credentials by user and mechanism (scram.go).
	ScramUsers map[string]map[string]ScramCredential
}

// Broker is a registered broker.
type Broker struct {
	ID     int32
	Host   string
	Port   int32
	Rack   string
	Fenced bool
	// InControlledShutdown: the broker asked for a controlled shutdown
	// and has not registered again since (KIP-841). Like a fenced broker
	// it may not join an ISR or lead.
	InControlledShutdown bool
	// Endpoints: every listener's advertised address (see Endpoint).
	Endpoints []Endpoint
	// HTTP is the advertised host:port of the broker's HTTP listener
	// (metrics, the schema registry), "" when it has none: where other
	// nodes forward schema registry writes.
	HTTP string
}

// IsrEligible reports whether the broker may join an ISR: it is
// registered, unfenced and not in controlled shutdown (KIP-841).
func (im *Image) IsrEligible(id int32) bool {
	b, ok := im.Brokers[id]
	return ok && !b.Fenced && !b.InControlledShutdown
}

// Topic is one topic. Immutable, like the Image holding it.
type Topic struct {
	Name       string
	ID         [16]byte
	Configs    map[string]string // topic-level overrides only; never nil
	Partitions []Partition       // Partitions[i].Index == i
	Internal   bool
}

// Partition is one partition's assignment and leadership.
type Partition struct {
	Index          int32
	Leader         int32 // -1: no leader
	LeaderEpoch    int32 // bumped when the leader changes
	PartitionEpoch int32 // bumped on every change
	Replicas       []int32
	ISR            []int32
	// AddingReplicas and RemovingReplicas describe a reassignment in
	// progress (AlterPartitionReassignments): both are subsets of
	// Replicas, which holds the target replicas first and then the ones
	// leaving. Empty when no reassignment is in progress.
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// Reassigning reports whether a reassignment is in progress.
func (p *Partition) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// TargetReplicas is where a reassignment takes the partition: Replicas
// without the ones leaving (Replicas itself when none is in progress).
func (p *Partition) TargetReplicas() []int32 {
	if len(p.RemovingReplicas) == 0 {
		return p.Replicas
	}
	out := make([]int32, 0, len(p.Replicas))
	for _, r := range p.Replicas {
		if !slices.Contains(p.RemovingReplicas, r) {
			out = append(out, r)
		}
	}
	return out
}

// NoLeader is Partition.Leader when the partition has none.
const NoLeader int32 = -1

// emptyImage is the Image before any entry applies.
func emptyImage() *Image {
	return &Image{
		Brokers:       map[int32]Broker{},
		Topics:        map[string]*Topic{},
		TopicIDs:      map[[16]byte]string{},
		BrokerConfigs: map[string]string{},
		GroupConfigs:  map[string]map[string]string{},
		ClientQuotas:  map[QuotaEntity]map[string]float64{},
		Controllers:   map[int32]string{},
	}
}

// GroupConfig returns a group's config overrides (nil when it has none;
// the map must not be modified).
func (im *Image) GroupConfig(group string) map[string]string { return im.GroupConfigs[group] }

// Topic returns the topic named name, or nil.
func (im *Image) Topic(name string) *Topic { return im.Topics[name] }

// TopicByID returns the topic with this id, or nil.
func (im *Image) TopicByID(id [16]byte) *Topic {
	name, ok := im.TopicIDs[id]
	if !ok {
		return nil
	}
	return im.Topics[name]
}

// Broker returns the broker with this id and whether it is registered.
func (im *Image) Broker(id int32) (Broker, bool) {
	b, ok := im.Brokers[id]
	return b, ok
}

// TopicNames returns the topic names in sorted order (a new slice).
func (im *Image) TopicNames() []string {
	names := make([]string, 0, len(im.Topics))
	for n := range im.Topics {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// BrokerIDs returns the registered broker ids in ascending order.
func (im *Image) BrokerIDs() []int32 {
	ids := make([]int32, 0, len(im.Brokers))
	for id := range im.Brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Nodes counts the nodes of the cluster: the members of the metadata
// quorum (voters and observers) and the unfenced brokers, each once; at
// least 1. It is the size the cluster is built to have rather than the
// nodes up now: a voter counts before its broker registers and while it
// is down, a node removed from the quorum stops counting once fenced.
func (im *Image) Nodes() int {
	n := len(im.Controllers)
	for id, b := range im.Brokers {
		if _, member := im.Controllers[id]; !member && !b.Fenced {
			n++
		}
	}
	return max(n, 1)
}

// ReplicationFactor is the fewest replicas a partition of the topic has;
// a partition being reassigned counts the smaller of its replica sets
// before and after. 0 for a topic with no partitions.
func (t *Topic) ReplicationFactor() int {
	rf := 0
	for i := range t.Partitions {
		p := &t.Partitions[i]
		n := len(p.Replicas) - max(len(p.AddingReplicas), len(p.RemovingReplicas))
		if i == 0 || n < rf {
			rf = n
		}
	}
	return rf
}

// Partition returns partition p of the topic, or nil when out of range.
func (t *Topic) Partition(p int32) *Partition {
	if t == nil || p < 0 || int(p) >= len(t.Partitions) {
		return nil
	}
	return &t.Partitions[p]
}
