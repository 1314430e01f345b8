package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/berthmq/berth/internal/metadata"
)

// BrokerState is what the election functions know of a broker.
type BrokerState uint8

const (
	// Offline: fenced, timed out or not registered. An offline broker
	// neither leads nor stays in an ISR (but see Reconcile for the last
	// ISR member).
	Offline BrokerState = iota
	// Live: registered, unfenced and heard from; may lead.
	Live
	// ShuttingDown: in controlled shutdown. Still serving, but leadership
	// moves off it wherever another ISR member can take it, it leaves the
	// ISRs it follows in, and it is never elected.
	ShuttingDown
)

func (s BrokerState) String() string {
	switch s {
	case Live:
		return "live"
	case ShuttingDown:
		return "shutting-down"
	default:
		return "offline"
	}
}

// Brokers maps broker ids to their state; a broker absent from the map is
// Offline.
type Brokers map[int32]BrokerState

// BrokersOf returns the image's view: fenced brokers Offline, those in
// controlled shutdown ShuttingDown, the others Live. The Supervisor
// refines it with liveness.
func BrokersOf(im *metadata.Image) Brokers {
	b := make(Brokers, len(im.Brokers))
	for id, br := range im.Brokers {
		switch {
		case br.Fenced:
			b[id] = Offline
		case br.InControlledShutdown:
			b[id] = ShuttingDown
		default:
			b[id] = Live
		}
	}
	return b
}

// Decision is a partition's leader and ISR as an election leaves them.
type Decision struct {
	Leader int32 // metadata.NoLeader: offline
	// ISR is never empty when Leader is set. It may share the
	// partition's slice: do not modify it.
	ISR []int32
	// Unclean: the leader was not in the ISR; records the old ISR had
	// acknowledged may be lost. The caller logs it as a data-loss risk.
	Unclean bool
}

// Change returns the PartitionChange that takes p (of topic) to d,
// fenced on p's partition epoch so that it applies only to the partition
// state it was decided from.
func (d Decision) Change(topic string, p *metadata.Partition) *metadata.PartitionChange {
	epoch := p.PartitionEpoch
	c := &metadata.PartitionChange{Topic: topic, Partition: p.Index, ExpectPartitionEpoch: &epoch}
	if d.Leader != p.Leader {
		l := d.Leader
		c.Leader = &l
	}
	if !slices.Equal(d.ISR, p.ISR) {
		c.ISR = append([]int32{}, d.ISR...)
	}
	return c
}

// same reports whether d leaves p as it is.
func (d Decision) same(p *metadata.Partition) bool {
	return d.Leader == p.Leader && slices.Equal(d.ISR, p.ISR)
}

// Reconcile decides what a partition needs given the brokers' states, and
// reports false when it needs nothing. It is the one rule the controller
// applies after a broker is fenced, returns or starts a controlled
// shutdown:
//
//  1. The ISR loses its members that are not Live. If that would leave it
//     empty, it keeps its members as they are (all of them are down, and
//     each has every record the partition committed; Kafka KRaft's rule of
//     keeping the last ISR member, for members that fail together).
//  2. A Live leader in that ISR stays. Otherwise the new leader is the
//     first replica, in replica order (the preferred order), that is Live
//     and in the ISR.
//  3. With none, a ShuttingDown leader stays leader (and in the ISR) until
//     it is fenced: it still serves, and nobody in sync could take over.
//  4. With none, and unclean election allowed, the leader is the first
//     Live replica outside the ISR and the ISR becomes just that replica
//     (Decision.Unclean).
//  5. Otherwise the partition is offline: leader NoLeader, ISR kept as the
//     last known members, so that the first of them to come back is
//     elected cleanly. (Kafka 4's eligible leader replicas, KIP-966, are
//     not modelled.)
//
// A returning broker does not rejoin ISRs here: the leader adds it back
// through AlterPartition once it has caught up.
func Reconcile(p *metadata.Partition, b Brokers, unclean bool) (Decision, bool) {
	live := func(id int32) bool { return b[id] == Live }
	if live(p.Leader) && !slices.ContainsFunc(p.ISR, func(id int32) bool { return !live(id) }) {
		return Decision{Leader: p.Leader, ISR: p.ISR}, false // the common case: nothing to do, no allocation
	}
	isr := filter(p.ISR, live)
	if len(isr) == 0 {
		isr = slices.Clone(p.ISR)
	}
	d := Decision{Leader: p.Leader, ISR: isr}
	inSync := func(id int32) bool { return live(id) && slices.Contains(isr, id) }
	if inSync(p.Leader) {
		return d, !d.same(p)
	}
	if i := firstIn(p.Replicas, inSync); i >= 0 {
		d.Leader = p.Replicas[i]
	} else if b[p.Leader] == ShuttingDown && slices.Contains(p.ISR, p.Leader) {
		lead := p.Leader
		d.ISR = filter(p.ISR, func(id int32) bool { return live(id) || id == lead })
	} else if i := firstIn(p.Replicas, live); unclean && i >= 0 {
		d.Leader = p.Replicas[i]
		d.ISR = []int32{d.Leader}
		d.Unclean = true
	} else {
		d.Leader = metadata.NoLeader
	}
	return d, !d.same(p)
}

// ElectPreferred decides a preferred-leader election (ElectLeaders
// PREFERRED, and the automatic rebalance): the first replica becomes
// leader. ErrElectionNotNeeded when it already is (and is Live),
// ErrPreferredLeaderNotAvailable when it is not Live or not in the ISR.
func ElectPreferred(p *metadata.Partition, b Brokers) (Decision, error) {
	if len(p.Replicas) == 0 {
		return Decision{}, fmt.Errorf("%w: partition %d has no replicas", ErrPreferredLeaderNotAvailable, p.Index)
	}
	pref := p.Replicas[0]
	if p.Leader == pref && b[pref] == Live {
		return Decision{}, fmt.Errorf("%w: broker %d already leads partition %d", ErrElectionNotNeeded, pref, p.Index)
	}
	if b[pref] != Live {
		return Decision{}, fmt.Errorf("%w: preferred replica %d of partition %d is %v",
			ErrPreferredLeaderNotAvailable, pref, p.Index, b[pref])
	}
	if !slices.Contains(p.ISR, pref) {
		return Decision{}, fmt.Errorf("%w: preferred replica %d of partition %d is not in the ISR %v",
			ErrPreferredLeaderNotAvailable, pref, p.Index, p.ISR)
	}
	return Decision{Leader: pref, ISR: slices.Clone(p.ISR)}, nil
}

// ElectUnclean decides an unclean election (ElectLeaders UNCLEAN): a
// partition whose leader is up needs none (ErrElectionNotNeeded); otherwise
// the first Live ISR member in replica order leads (a clean election), or
// else the first Live replica with the ISR reset to it (Unclean), or no
// replica can (ErrEligibleLeadersNotAvailable).
func ElectUnclean(p *metadata.Partition, b Brokers) (Decision, error) {
	if p.Leader != metadata.NoLeader && b[p.Leader] != Offline {
		return Decision{}, fmt.Errorf("%w: partition %d has leader %d", ErrElectionNotNeeded, p.Index, p.Leader)
	}
	d, _ := Reconcile(p, b, true)
	if d.Leader == metadata.NoLeader {
		return Decision{}, fmt.Errorf("%w: no live replica of partition %d (replicas %v)", ErrEligibleLeadersNotAvailable, p.Index, p.Replicas)
	}
	return d, nil
}

// UncleanConfig is the topic (and broker) config that allows unclean
// leader election.
const UncleanConfig = "unclean.leader.election.enable"

// UncleanEnabled resolves unclean.leader.election.enable for topic t: the
// topic override, else the dynamic broker setting in the image, else def
// (the static broker setting or Kafka's default, false). A value that is
// not a boolean counts as false.
func UncleanEnabled(im *metadata.Image, t *metadata.Topic, def bool) bool {
	v, ok := "", false
	if t != nil {
		v, ok = t.Configs[UncleanConfig]
	}
	if !ok {
		v, ok = im.BrokerConfigs[UncleanConfig]
	}
	if !ok {
		return def
	}
	on, err := strconv.ParseBool(strings.TrimSpace(v))
	return err == nil && on
}

// ElectionType is ElectLeaders' election type, with Kafka's values.
type ElectionType int8

const (
	Preferred ElectionType = 0
	Unclean   ElectionType = 1
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ElectionResult is the outcome for one partition of PlanElections.
type ElectionResult struct {
	TopicPartition
	// Change is the record to propose, nil when Err is set.
	Change   *metadata.PartitionChange
	Decision Decision
	// Err is nil, ErrElectionNotNeeded, ErrPreferredLeaderNotAvailable,
	// ErrEligibleLeadersNotAvailable or ErrUnknownPartition.
	Err error
}

// PlanElections decides an ElectLeaders request over im: parts, or every
// partition of every topic (in name and index order) when parts is nil.
// Kafka answers the nil form with the partitions that were elected only,
// which the caller can do by dropping ErrElectionNotNeeded (and, for
// PREFERRED, ErrPreferredLeaderNotAvailable) results.
func PlanElections(im *metadata.Image, b Brokers, typ ElectionType, parts []TopicPartition) []ElectionResult {
	if parts == nil {
		for _, name := range im.TopicNames() {
			for _, p := range im.Topics[name].Partitions {
				parts = append(parts, TopicPartition{name, p.Index})
			}
		}
	}
	out := make([]ElectionResult, len(parts))
	for i, tp := range parts {
		r := ElectionResult{TopicPartition: tp}
		p := im.Topic(tp.Topic).Partition(tp.Partition)
		switch {
		case p == nil:
			r.Err = fmt.Errorf("%w: %s-%d", ErrUnknownPartition, tp.Topic, tp.Partition)
		case typ == Unclean:
			r.Decision, r.Err = ElectUnclean(p, b)
		default:
			r.Decision, r.Err = ElectPreferred(p, b)
		}
		if r.Err == nil {
			r.Change = r.Decision.Change(tp.Topic, p)
		}
		out[i] = r
	}
	return out
}

// filter returns the members of ids for which keep holds, in order (a new
// slice, non-nil).
func filter(ids []int32, keep func(int32) bool) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if keep(id) {
			out = append(out, id)
		}
	}
	return out
}

// firstIn returns the index of the first id for which ok holds, or -1.
func firstIn(ids []int32, ok func(int32) bool) int {
	return slices.IndexFunc(ids, ok)
}
