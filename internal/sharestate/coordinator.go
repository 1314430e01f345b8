// Package sharestate is the share coordinator (KIP-932): it keeps the
// durable state of share-partitions in the internal topic
// __share_group_state. A share-partition (group, topic id, partition)
// belongs to partition PartitionFor(key) of that topic, and the leader
// of that partition is its share coordinator: it replays the partition
// into memory when it becomes leader (one state per share-partition),
// answers ReadShareGroupState and WriteShareGroupState (keys 84, 85)
// from brokers that lead share-partitions, and appends every accepted
// write as a record before answering.
//
// Every record is a ShareSnapshot of the whole state of one
// share-partition (docs/format/share-state.md), keyed by the
// share-partition, so that the topic can be compacted: the latest record
// of a key is its state. Writes carry updates (Kafka's form); the
// coordinator applies them to the state it holds and writes the result.
//
// Writes are fenced by leader epoch: once a broker has read or written
// the state under leader epoch e, a write under an older epoch (a
// deposed leader) is refused with FENCED_LEADER_EPOCH. A read waits for
// the share-partition's write in flight, so it never sees state that is
// not yet durable.
package sharestate

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/share"
)

// Topic is the internal topic of share-partition state.
const Topic = metadata.ShareStateTopic

// Package errors; the handlers map them to Kafka codes with errors.As
// (they wrap kerr errors).
var (
	ErrNotCoordinator = fmt.Errorf("%w: not the share coordinator of this share-partition", kerr.NotCoordinator)
	ErrLoading        = fmt.Errorf("%w: share coordinator loading", kerr.CoordinatorLoadInProgress)
	ErrFenced         = fmt.Errorf("%w: a newer leader of the share-partition has read or written its state", kerr.FencedLeaderEpoch)
	ErrFencedState    = fmt.Errorf("%w: the share-partition's state was reset", kerr.FencedStateEpoch)
	ErrNoState        = fmt.Errorf("%w: no state to update; the first write must carry the start offset", kerr.InvalidRequest)
)

// CoordinatorKey is the share-partition's key in FindCoordinator (key
// type 2) and its placement: Kafka's "group:topicId:partition", the
// topic id in Kafka's URL-safe base64.
func CoordinatorKey(k share.Key) string {
	return k.Group + ":" + base64.RawURLEncoding.EncodeToString(k.TopicID[:]) + ":" + strconv.Itoa(int(k.Partition))
}

// PartitionFor is the __share_group_state partition of k among n.
func PartitionFor(k share.Key, n int32) int32 { return metadata.PartitionForKey(CoordinatorKey(k), n) }

// Appender appends records to partition p of __share_group_state, which
// this node leads, and returns a wait that blocks until they are durable
// (committed: below the high watermark): replica.StateLog, as for the
// group and transaction coordinators.
type Appender interface {
	Append(p int32, recs []batch.KV) (wait func() error, err error)
}

// Coordinator holds the states of the __share_group_state partitions this
// node leads.
//
// Lock order: a state's mu before Coordinator.mu.
type Coordinator struct {
	// Leader, if set (before the coordinator is used), says what the
	// metadata says of the __share_group_state partition of a key this
	// coordinator does not own: a request answers
	// COORDINATOR_LOAD_IN_PROGRESS while this node leads it but has not
	// begun to load it, COORDINATOR_NOT_AVAILABLE while the topic does not
	// exist or the partition has no leader, else NOT_COORDINATOR
	// (as group.NotOwnedError). Nil: NOT_COORDINATOR. Called with c.mu held.
	Leader func(k share.Key) metadata.Leadership

	appendTo Appender
	log      *slog.Logger

	mu    sync.Mutex
	parts map[int32]*ownedPart
	n     int32 // partitions of the topic, for placement checks (0: unknown)
}

type ownedPart struct {
	loading bool
	states  map[share.Key]*state
}

// state is one share-partition's; mu serialises its reads and writes
// (held across a write's append and wait).
type state struct {
	mu     sync.Mutex
	snap   share.Snapshot
	exists bool
	fence  int32 // highest leader epoch that read or wrote
}

// New returns a coordinator owning nothing.
func New(appendTo Appender, logger *slog.Logger) *Coordinator {
	if logger == nil {
		logger = slog.Default()
	}
	return &Coordinator{appendTo: appendTo, log: logger, parts: map[int32]*ownedPart{}}
}

// BeginLoad marks partition p owned and loading (requests for it answer
// COORDINATOR_LOAD_IN_PROGRESS until FinishLoad).
func (c *Coordinator) BeginLoad(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parts[p] = &ownedPart{loading: true, states: map[share.Key]*state{}}
}

// LoadRecord replays one record of partition p, in log order.
func (c *Coordinator) LoadRecord(p int32, key, value []byte) error {
	typ, g, id, part, err := share.ParseKey(key)
	if err != nil {
		return err
	}
	k := share.Key{Group: g, TopicID: id, Partition: part}
	c.mu.Lock()
	op := c.parts[p]
	c.mu.Unlock()
	if op == nil {
		return ErrNotCoordinator
	}
	if value == nil {
		delete(op.states, k)
		return nil
	}
	switch typ {
	case share.RecordSnapshot:
		s, err := share.DecodeSnapshot(value)
		if err != nil {
			return err
		}
		if s.StartOffset < 0 { // deleted, its state epoch kept (Delete)
			op.states[k] = &state{snap: share.Snapshot{StateEpoch: s.StateEpoch}, fence: s.LeaderEpoch}
			return nil
		}
		op.states[k] = &state{snap: s, exists: true, fence: s.LeaderEpoch}
	case share.RecordUpdate:
		u, err := share.DecodeUpdate(value)
		if err != nil {
			return err
		}
		st := op.states[k]
		if st == nil {
			return fmt.Errorf("%w: update of %s with no snapshot before it", share.ErrCorruptState, CoordinatorKey(k))
		}
		s, err := applyUpdate(st.snap, u)
		if err != nil {
			return err
		}
		st.snap, st.fence = s, max(st.fence, u.LeaderEpoch)
	default:
		return fmt.Errorf("%w: record type %d", share.ErrCorruptState, typ)
	}
	return nil
}

// FinishLoad ends the load of partition p.
func (c *Coordinator) FinishLoad(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if op := c.parts[p]; op != nil {
		op.loading = false
	}
}

// Unload drops partition p (leadership moved away).
func (c *Coordinator) Unload(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.parts, p)
}

// SetPartitions records the partition count of __share_group_state.
func (c *Coordinator) SetPartitions(n int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = n
}

// get returns k's state in an owned, loaded partition, made if create.
func (c *Coordinator) get(k share.Key, create bool) (*state, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var op *ownedPart
	if c.n > 0 {
		op = c.parts[PartitionFor(k, c.n)]
	}
	switch {
	case op == nil:
		return nil, c.notOwned(k)
	case op.loading:
		return nil, ErrLoading
	}
	st := op.states[k]
	if st == nil && create {
		st = &state{fence: -1}
		op.states[k] = st
	}
	return st, nil
}

// notOwned is the error for k, whose partition c does not own (c.mu
// held): ErrNotCoordinator, or ErrLoading or COORDINATOR_NOT_AVAILABLE
// by what Leader says.
func (c *Coordinator) notOwned(k share.Key) error {
	if c.Leader == nil {
		return ErrNotCoordinator
	}
	switch c.Leader(k) {
	case metadata.LeaderSelf:
		return ErrLoading
	case metadata.LeaderNone:
		return fmt.Errorf("%w: no leader of the share-partition's %s partition yet", kerr.CoordinatorNotAvailable, Topic)
	}
	return ErrNotCoordinator
}

// Read returns k's state (ok false: none), fencing writes from leader
// epochs older than leaderEpoch (none when leaderEpoch is negative: a
// reader that will not write, and leaves nothing behind).
func (c *Coordinator) Read(k share.Key, leaderEpoch int32) (share.Snapshot, bool, error) {
	st, err := c.get(k, leaderEpoch >= 0)
	if err != nil || st == nil {
		return share.Snapshot{}, false, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case leaderEpoch < 0: // a look (DescribeShareGroupOffsets): no fencing
	case leaderEpoch < st.fence:
		return share.Snapshot{}, false, ErrFenced
	default:
		st.fence = leaderEpoch
	}
	if !st.exists {
		return share.Snapshot{StateEpoch: st.snap.StateEpoch}, false, nil
	}
	return st.snap, true, nil
}

// Write applies u to k's state and makes the result durable before
// returning. A share-partition with no state must be initialised by an
// update that carries its start offset.
func (c *Coordinator) Write(k share.Key, u share.Update) error {
	st, err := c.get(k, true)
	if err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if u.LeaderEpoch < st.fence {
		return ErrFenced
	}
	base := st.snap
	switch {
	case u.StateEpoch != base.StateEpoch:
		return ErrFencedState // the state was reset or deleted since the writer read it
	case !st.exists && u.StartOffset < 0:
		return ErrNoState
	case !st.exists:
		base = share.Snapshot{StartOffset: u.StartOffset, StateEpoch: st.snap.StateEpoch}
	}
	next, err := applyUpdate(base, u)
	if err != nil {
		return err
	}
	if err := c.append(k, next); err != nil {
		return err
	}
	st.snap, st.exists, st.fence = next, true, u.LeaderEpoch
	return nil
}

// Initialize resets k's state to start at offset start with a new state
// epoch (AlterShareGroupOffsets): writes of the previous state epoch are
// then refused, and the partition leader loads the new state.
func (c *Coordinator) Initialize(k share.Key, start int64) error {
	st, err := c.get(k, true)
	if err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	next := share.Snapshot{StateEpoch: st.snap.StateEpoch + 1, SnapshotEpoch: st.snap.SnapshotEpoch + 1,
		LeaderEpoch: max(st.fence, 0), StartOffset: start}
	if err := c.append(k, next); err != nil {
		return err
	}
	st.snap, st.exists = next, true
	return nil
}

// Delete removes k's state (DeleteShareGroupOffsets). The record left is
// a snapshot with start offset -1 and the next state epoch, not a
// tombstone, so that after a coordinator failover a write from whoever
// loaded the old state is still refused.
func (c *Coordinator) Delete(k share.Key) error {
	st, err := c.get(k, false)
	if err != nil || st == nil || !st.exists {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	gone := share.Snapshot{StateEpoch: st.snap.StateEpoch + 1, SnapshotEpoch: st.snap.SnapshotEpoch + 1,
		LeaderEpoch: max(st.fence, 0), StartOffset: -1}
	if err := c.append(k, gone); err != nil {
		return err
	}
	st.snap, st.exists = share.Snapshot{StateEpoch: gone.StateEpoch}, false
	return nil
}

func (c *Coordinator) partitions() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// append writes s as k's latest snapshot and waits until it is durable
// (st.mu held).
func (c *Coordinator) append(k share.Key, s share.Snapshot) error {
	key := share.AppendKey(nil, share.RecordSnapshot, k.Group, k.TopicID, k.Partition)
	wait, err := c.appendTo.Append(PartitionFor(k, c.partitions()), []batch.KV{{Key: key, Value: s.AppendTo(nil)}})
	if err != nil {
		return err
	}
	return wait()
}

// applyUpdate returns the snapshot after u.
func applyUpdate(base share.Snapshot, u share.Update) (share.Snapshot, error) {
	p, err := share.LoadPartition(share.PartitionDefaults(), base, nil)
	if err != nil {
		return share.Snapshot{}, err
	}
	if err := p.Apply(u); err != nil {
		return share.Snapshot{}, err
	}
	next := p.Snapshot()
	next.SnapshotEpoch = base.SnapshotEpoch + 1
	next.StateEpoch = base.StateEpoch
	next.LeaderEpoch = max(base.LeaderEpoch, u.LeaderEpoch)
	return next, nil
}

// IsRetriable says whether a Read or Write error may succeed later (at
// this or another coordinator).
func IsRetriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		// Fenced is final for this writer (Kafka marks it retriable
		// because a client refreshes its metadata and retries elsewhere).
		return ke != kerr.FencedLeaderEpoch && (ke.Retriable || ke == kerr.NotCoordinator)
	}
	return true // I/O
}
