package metadata

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// MaxPartitions bounds the partitions of one topic.
const MaxPartitions = 100_000

// Result is what applying an entry produced besides the new Image.
type Result struct {
	// ProducerIDs holds the first id of each ProducerIDBlock record of the
	// batch, in record order.
	ProducerIDs []int64
}

// Apply applies the records of the entry at index to im and returns the
// next image. It is the whole state machine: pure and deterministic (no
// I/O, clock or randomness), so every replica computes the same images.
//
// A batch is atomic: if any record fails, Apply returns the first error and
// an image equal to im except that Index is index (the entry is consumed
// either way). im is never modified.
func Apply(im *Image, index uint64, recs []Record) (*Image, Result, error) {
	b := newBuilder(im)
	var res Result
	for i := range recs {
		if err := b.apply(&recs[i], &res); err != nil {
			next := *im
			next.Index = index
			return &next, Result{}, err
		}
	}
	b.im.Index = index
	return b.im, res, nil
}

// builder makes the next Image copy-on-write: maps and topics are cloned
// the first time the batch writes them, so unchanged parts stay shared
// with the previous image.
type builder struct {
	im                            *Image
	ownBrokers, ownTopics, ownIDs bool
	ownGroups                     bool
	ownQuotas                     bool
	ownTopic                      map[string]bool // topics cloned by this batch
}

func newBuilder(im *Image) *builder {
	next := *im
	return &builder{im: &next, ownTopic: map[string]bool{}}
}

func (b *builder) brokers() map[int32]Broker {
	if !b.ownBrokers {
		b.im.Brokers, b.ownBrokers = maps.Clone(b.im.Brokers), true
	}
	return b.im.Brokers
}

func (b *builder) topics() map[string]*Topic {
	if !b.ownTopics {
		b.im.Topics, b.ownTopics = maps.Clone(b.im.Topics), true
	}
	return b.im.Topics
}

func (b *builder) topicIDs() map[[16]byte]string {
	if !b.ownIDs {
		b.im.TopicIDs, b.ownIDs = maps.Clone(b.im.TopicIDs), true
	}
	return b.im.TopicIDs
}

// topic returns a writable copy of the named topic, or ErrUnknownTopic.
// Its Partitions slice and Configs map are private to the batch; the
// Replicas and ISR slices inside are still shared and must be replaced,
// never written.
func (b *builder) topic(name string) (*Topic, error) {
	t := b.im.Topics[name]
	if t == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	if b.ownTopic[name] {
		return t, nil
	}
	c := *t
	c.Configs = maps.Clone(t.Configs)
	c.Partitions = slices.Clone(t.Partitions)
	b.topics()[name] = &c
	b.ownTopic[name] = true
	return &c, nil
}

func (b *builder) apply(r *Record, res *Result) error {
	if _, err := r.kind(); err != nil {
		return err
	}
	switch {
	case r.RegisterBroker != nil:
		return b.registerBroker(r.RegisterBroker)
	case r.FenceBroker != nil:
		return b.fenceBroker(r.FenceBroker)
	case r.CreateTopic != nil:
		return b.createTopic(r.CreateTopic)
	case r.DeleteTopic != nil:
		return b.deleteTopic(r.DeleteTopic)
	case r.CreatePartitions != nil:
		return b.createPartitions(r.CreatePartitions)
	case r.SetTopicConfigs != nil:
		c := r.SetTopicConfigs
		t, err := b.topic(c.Name)
		if err != nil {
			return err
		}
		t.Configs, err = changeConfigs(t.Configs, c.Set, c.Delete, c.Replace)
		return err
	case r.SetBrokerConfigs != nil:
		c := r.SetBrokerConfigs
		cfg, err := changeConfigs(b.im.BrokerConfigs, c.Set, c.Delete, c.Replace)
		if err != nil {
			return err
		}
		b.im.BrokerConfigs = cfg
		return nil
	case r.SetGroupConfigs != nil:
		return b.setGroupConfigs(r.SetGroupConfigs)
	case r.SetClientQuotas != nil:
		return b.setClientQuotas(r.SetClientQuotas)
	case r.UserScramCredential != nil:
		return b.userScramCredential(r.UserScramCredential)
	case r.ProducerIDBlock != nil:
		n := r.ProducerIDBlock.Count
		if n < 1 || n > MaxProducerIDBlock {
			return fmt.Errorf("%w: producer id block count %d not in [1, %d]", ErrInvalidRecord, n, MaxProducerIDBlock)
		}
		first := b.im.NextProducerID
		if first > math.MaxInt64-n {
			return fmt.Errorf("%w: producer ids exhausted", ErrInvalidRecord)
		}
		b.im.NextProducerID = first + n
		res.ProducerIDs = append(res.ProducerIDs, first)
		return nil
	case r.SetClusterID != nil:
		id := r.SetClusterID.ID
		if err := validClusterID(id); err != nil {
			return err
		}
		if b.im.ClusterID != "" && b.im.ClusterID != id {
			return fmt.Errorf("%w: have %q, record sets %q", ErrClusterIDMismatch, b.im.ClusterID, id)
		}
		b.im.ClusterID = id
		return nil
	case r.CreateACLs != nil:
		return b.applyACLs(r.CreateACLs.ACLs, nil)
	case r.DeleteACLs != nil:
		return b.applyACLs(nil, r.DeleteACLs.ACLs)
	default:
		return b.partitionChange(r.PartitionChange)
	}
}

func (b *builder) setGroupConfigs(c *SetGroupConfigs) error {
	if c.Group == "" {
		return fmt.Errorf("%w: group configs need a group id", ErrInvalidConfig)
	}
	cfg, err := changeConfigs(b.im.GroupConfigs[c.Group], c.Set, c.Delete, c.Replace)
	if err != nil {
		return err
	}
	if !b.ownGroups {
		b.im.GroupConfigs, b.ownGroups = maps.Clone(b.im.GroupConfigs), true
		if b.im.GroupConfigs == nil {
			b.im.GroupConfigs = map[string]map[string]string{}
		}
	}
	if len(cfg) == 0 {
		delete(b.im.GroupConfigs, c.Group)
	} else {
		b.im.GroupConfigs[c.Group] = cfg
	}
	return nil
}

func (b *builder) registerBroker(r *RegisterBroker) error {
	switch {
	case r.ID < 0:
		return fmt.Errorf("%w: broker id %d < 0", ErrInvalidRecord, r.ID)
	case r.Host == "":
		return fmt.Errorf("%w: broker %d has no host", ErrInvalidRecord, r.ID)
	case r.Port < 1 || r.Port > 65535:
		return fmt.Errorf("%w: broker %d port %d out of range", ErrInvalidRecord, r.ID, r.Port)
	}
	if err := checkEndpoints(r.ID, r.Endpoints); err != nil {
		return err
	}
	b.brokers()[r.ID] = Broker{ID: r.ID, Host: r.Host, Port: r.Port, Rack: r.Rack, Endpoints: r.Endpoints, HTTP: r.HTTP}
	return nil
}

func (b *builder) fenceBroker(r *FenceBroker) error {
	br, ok := b.im.Brokers[r.ID]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, r.ID)
	}
	br.Fenced, br.InControlledShutdown = r.Fenced, r.InControlledShutdown
	b.brokers()[r.ID] = br
	return nil
}

// brokerState says why a broker is not eligible for an ISR.
func (b *builder) brokerState(id int32) string {
	br, ok := b.im.Brokers[id]
	switch {
	case !ok:
		return "is not registered"
	case br.Fenced:
		return "is fenced"
	case br.InControlledShutdown:
		return "is in controlled shutdown"
	default:
		return "is eligible"
	}
}

func (b *builder) createTopic(r *CreateTopic) error {
	if err := ValidTopicName(r.Name); err != nil {
		return err
	}
	if _, ok := b.im.Topics[r.Name]; ok {
		return fmt.Errorf("%w: %q", ErrTopicExists, r.Name)
	}
	if r.ID == ([16]byte{}) {
		return fmt.Errorf("%w: topic %q has the zero topic id", ErrInvalidTopic, r.Name)
	}
	if other, ok := b.im.TopicIDs[r.ID]; ok {
		return fmt.Errorf("%w: topic id %s is in use by %q", ErrTopicExists, FormatUUID(r.ID), other)
	}
	if r.Partitions < 1 || r.Partitions > MaxPartitions {
		return fmt.Errorf("%w: %d partitions, want 1..%d", ErrInvalidPartitions, r.Partitions, MaxPartitions)
	}
	if int(r.Partitions) != len(r.Replicas) {
		return fmt.Errorf("%w: %d partitions but %d replica lists", ErrInvalidReplicas, r.Partitions, len(r.Replicas))
	}
	if err := validAssignment(r.Replicas); err != nil {
		return err
	}
	cfg, err := changeConfigs(nil, r.Configs, nil, true)
	if err != nil {
		return err
	}
	t := &Topic{Name: r.Name, ID: r.ID, Configs: cfg, Internal: r.Internal}
	t.Partitions = newPartitions(0, r.Replicas)
	b.topics()[r.Name] = t
	b.ownTopic[r.Name] = true
	b.topicIDs()[r.ID] = r.Name
	return nil
}

func newPartitions(first int, replicas [][]int32) []Partition {
	ps := make([]Partition, len(replicas))
	for i, rs := range replicas {
		rs = slices.Clone(rs)
		ps[i] = Partition{
			Index:    int32(first + i),
			Leader:   rs[0],
			Replicas: rs,
			ISR:      slices.Clone(rs),
		}
	}
	return ps
}

func (b *builder) deleteTopic(r *DeleteTopic) error {
	name := r.Name
	if r.ID != ([16]byte{}) {
		byID, ok := b.im.TopicIDs[r.ID]
		if !ok {
			return fmt.Errorf("%w: topic id %s", ErrUnknownTopic, FormatUUID(r.ID))
		}
		if name != "" && name != byID {
			return fmt.Errorf("%w: topic id %s is %q, not %q", ErrUnknownTopic, FormatUUID(r.ID), byID, name)
		}
		name = byID
	}
	t := b.im.Topics[name]
	if t == nil {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	delete(b.topics(), name)
	delete(b.topicIDs(), t.ID)
	delete(b.ownTopic, name)
	return nil
}

func (b *builder) createPartitions(r *CreatePartitions) error {
	t, err := b.topic(r.Name)
	if err != nil {
		return err
	}
	if len(r.Replicas) == 0 {
		return fmt.Errorf("%w: no new partitions for %q", ErrInvalidPartitions, r.Name)
	}
	if len(t.Partitions)+len(r.Replicas) > MaxPartitions {
		return fmt.Errorf("%w: %q would have more than %d partitions", ErrInvalidPartitions, r.Name, MaxPartitions)
	}
	if err := validAssignment(r.Replicas); err != nil {
		return err
	}
	t.Partitions = append(t.Partitions, newPartitions(len(t.Partitions), r.Replicas)...)
	return nil
}

func (b *builder) partitionChange(r *PartitionChange) error {
	t, err := b.topic(r.Topic)
	if err != nil {
		return err
	}
	if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return fmt.Errorf("%w: %q has no partition %d", ErrInvalidPartitions, r.Topic, r.Partition)
	}
	old := t.Partitions[r.Partition]
	if r.ExpectPartitionEpoch != nil && *r.ExpectPartitionEpoch != old.PartitionEpoch {
		return fmt.Errorf("%w: %q partition %d is at epoch %d, not %d",
			ErrStaleEpoch, r.Topic, r.Partition, old.PartitionEpoch, *r.ExpectPartitionEpoch)
	}
	p := old
	if r.Replicas != nil {
		if err := validReplicaList(r.Replicas); err != nil {
			return err
		}
		p.Replicas = slices.Clone(r.Replicas)
	}
	if r.ISR != nil {
		p.ISR = slices.Clone(r.ISR)
	}
	if r.Leader != nil {
		p.Leader = *r.Leader
	}
	if r.AddingReplicas != nil {
		p.AddingReplicas = nilIfEmpty(r.AddingReplicas)
	}
	if r.RemovingReplicas != nil {
		p.RemovingReplicas = nilIfEmpty(r.RemovingReplicas)
	}
	if err := validISR(p); err != nil {
		return fmt.Errorf("%q partition %d: %w", r.Topic, r.Partition, err)
	}
	if err := validReassignment(p); err != nil {
		return fmt.Errorf("%q partition %d: %w", r.Topic, r.Partition, err)
	}
	if r.EligibleISR {
		for _, id := range p.ISR {
			if !slices.Contains(old.ISR, id) && !b.im.IsrEligible(id) {
				return fmt.Errorf("%w: %q partition %d: broker %d %s and cannot join the ISR",
					ErrIneligibleReplica, r.Topic, r.Partition, id, b.brokerState(id))
			}
		}
	}
	leaderChanged := p.Leader != old.Leader
	if !leaderChanged && slices.Equal(p.Replicas, old.Replicas) && slices.Equal(p.ISR, old.ISR) &&
		slices.Equal(p.AddingReplicas, old.AddingReplicas) && slices.Equal(p.RemovingReplicas, old.RemovingReplicas) {
		return nil // no change, no epoch bump
	}
	if leaderChanged {
		p.LeaderEpoch++
	}
	p.PartitionEpoch++
	t.Partitions[r.Partition] = p
	return nil
}

func nilIfEmpty(s []int32) []int32 {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

// validReassignment checks that the replicas being added and removed are
// distinct replicas of the partition, and that some replica stays.
func validReassignment(p Partition) error {
	for _, set := range [][]int32{p.AddingReplicas, p.RemovingReplicas} {
		seen := map[int32]bool{}
		for _, r := range set {
			if seen[r] || !slices.Contains(p.Replicas, r) {
				return fmt.Errorf("%w: reassignment names broker %d twice or outside the replicas %v", ErrInvalidReplicas, r, p.Replicas)
			}
			seen[r] = true
		}
	}
	for _, r := range p.AddingReplicas {
		if slices.Contains(p.RemovingReplicas, r) {
			return fmt.Errorf("%w: broker %d is both added and removed", ErrInvalidReplicas, r)
		}
	}
	if len(p.RemovingReplicas) >= len(p.Replicas) {
		return fmt.Errorf("%w: a reassignment cannot remove every replica", ErrInvalidReplicas)
	}
	return nil
}

// validISR checks ISR ⊆ Replicas without duplicates, and that the leader
// is NoLeader or in the ISR.
func validISR(p Partition) error {
	seen := map[int32]bool{}
	for _, r := range p.ISR {
		if seen[r] {
			return fmt.Errorf("%w: broker %d twice in ISR", ErrInvalidReplicas, r)
		}
		seen[r] = true
		if !slices.Contains(p.Replicas, r) {
			return fmt.Errorf("%w: ISR member %d is not a replica", ErrInvalidReplicas, r)
		}
	}
	if p.Leader != NoLeader && !seen[p.Leader] {
		return fmt.Errorf("%w: leader %d is not in the ISR", ErrInvalidReplicas, p.Leader)
	}
	return nil
}

// validAssignment checks new partitions' replica lists: each valid, all of
// the same length (Kafka's rule for one request).
func validAssignment(lists [][]int32) error {
	for i, rs := range lists {
		if err := validReplicaList(rs); err != nil {
			return fmt.Errorf("partition %d: %w", i, err)
		}
		if len(rs) != len(lists[0]) {
			return fmt.Errorf("%w: partitions have different replication factors", ErrInvalidReplicas)
		}
	}
	return nil
}

func validReplicaList(rs []int32) error {
	if len(rs) == 0 {
		return fmt.Errorf("%w: empty replica list", ErrInvalidReplicas)
	}
	for i, r := range rs {
		if r < 0 {
			return fmt.Errorf("%w: broker id %d < 0", ErrInvalidReplicas, r)
		}
		if slices.Contains(rs[:i], r) {
			return fmt.Errorf("%w: broker %d twice", ErrInvalidReplicas, r)
		}
	}
	return nil
}

// changeConfigs returns a new map: cur with set applied and del removed, or
// exactly set when replace. It never returns nil and never modifies cur.
func changeConfigs(cur, set map[string]string, del []string, replace bool) (map[string]string, error) {
	if replace && len(del) > 0 {
		return nil, fmt.Errorf("%w: replace with deletions", ErrInvalidConfig)
	}
	for k := range set {
		if k == "" {
			return nil, fmt.Errorf("%w: empty config name", ErrInvalidConfig)
		}
	}
	for _, k := range del {
		if k == "" {
			return nil, fmt.Errorf("%w: empty config name", ErrInvalidConfig)
		}
		if _, ok := set[k]; ok {
			return nil, fmt.Errorf("%w: %q both set and deleted", ErrInvalidConfig, k)
		}
	}
	next := map[string]string{}
	if !replace {
		maps.Copy(next, cur)
	}
	maps.Copy(next, set)
	for _, k := range del {
		delete(next, k)
	}
	return next, nil
}

// ValidTopicName applies Kafka's rules: 1..249 characters of [a-zA-Z0-9._-],
// not "." or "..".
func ValidTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("%w: illegal name %q", ErrInvalidTopic, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: illegal character %q in %q", ErrInvalidTopic, c, name)
		}
	}
	return nil
}
