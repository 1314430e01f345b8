package replica

// Replication, the leader's side: follower progress, the ISR, and the high
// watermark (Kafka's ISR protocol).
//
// A partition is either the leader (it takes produce requests and serves
// fetches) or a follower (it copies the leader's log with the Fetch API;
// see fetcher.go). The leader records each follower's log end offset from
// the offset it fetches at: a follower fetches at offset N only when every
// record below N is in its log, and, with durability.mode=fsync, fsync'd
// there. The high watermark is the smallest of the leader's own durable
// offset and the fetch offsets of the in-sync replicas, so a record below
// the high watermark is durable on every ISR member: that is what acks=all
// waits for and what consumers may read.
//
// ISR changes are proposed to the controller (PartitionChange with the
// partition epoch, Kafka's AlterPartition) and take effect when the new
// metadata image applies. While a change is pending the high watermark
// counts the larger of the old and the proposed ISR (KIP-497's "maximal
// ISR"), so it never advances on the strength of a shrink that the
// controller has not committed.
//
// A follower that the metadata shows fenced or in controlled shutdown is
// not proposed for the ISR however caught up it is (KIP-841): the
// controller took it out and would refuse it (ErrIneligibleReplica); it
// is proposed on its first fetch after the image shows it eligible again.
// After a refused or failed proposal the partition waits before it
// proposes again (alterBackoffMin, doubling up to alterBackoffMax), so
// that no disagreement with the controller turns into a stream of
// proposals.

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/berthmq/berth/internal/metadata"
)

// More errors of the partition API.
var (
	// ErrNotEnoughReplicasAfterAppend: the record was written but the ISR
	// shrank below min.insync.replicas before it was replicated.
	ErrNotEnoughReplicasAfterAppend = errors.New("replica: in-sync replicas fell below min.insync.replicas after the append") // NOT_ENOUGH_REPLICAS_AFTER_APPEND
	// ErrNotReplica: a fetch from a broker that is not a replica.
	ErrNotReplica = errors.New("replica: the fetching broker is not a replica of this partition") // NOT_LEADER_OR_FOLLOWER
)

// alterBackoffMin and alterBackoffMax bound how long a partition waits
// before proposing another ISR change after one was refused or failed;
// the wait doubles with each failure in a row and resets on a success.
const (
	alterBackoffMin = 100 * time.Millisecond
	alterBackoffMax = 2 * time.Second
)

// follower is the leader's view of one follower.
type follower struct {
	leo          int64 // fetch offset of its last fetch; -1 before the first
	lastFetch    int64 // ms
	leaderLEOAt  int64 // leader's log end offset at lastFetch
	lastCaughtUp int64 // ms; when it last had everything the leader had
}

// replState is the replication state of a partition, guarded by
// Partition.rmu.
type replState struct {
	leader    int32 // -1: none known
	replicas  []int32
	isr       []int32 // committed in the metadata image
	pending   []int32 // ISR proposed to the controller; nil when none
	partEpoch int32
	// alterSeq numbers the ISR proposals, so that the late answer to an
	// old one does not clear a newer one's pending ISR.
	alterSeq uint64
	// alterBackoff is the wait after the last failed proposal (0 after a
	// success); no proposal is made before alterRetryAt (ms).
	alterBackoff time.Duration
	alterRetryAt int64
	followers    map[int32]*follower
	// epochStart is the leader's log end offset when its leadership began:
	// a follower rejoins the ISR only once it has everything below it.
	epochStart int64
}

// throttled reports whether this replica is being added by a reassignment,
// so its fetching honours follower.replication.throttled.rate.
func (p *Partition) throttled() bool { return p.adding.Load() }

// IsLeader reports whether this replica is the partition's leader.
func (p *Partition) IsLeader() bool { return p.leading.Load() }

// Leader returns the leader's broker id as this replica knows it, -1 if
// none.
func (p *Partition) Leader() int32 {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	return p.repl.leader
}

// CaughtUpAsLeader reports whether a leader's high watermark has reached
// the log end it had when its leadership began (KIP-207: until then it
// may be below what the previous leader answered). True for followers.
func (p *Partition) CaughtUpAsLeader() bool {
	if !p.leading.Load() {
		return true
	}
	p.rmu.Lock()
	start := p.repl.epochStart
	p.rmu.Unlock()
	return p.hw.Load() >= start
}

// ISR returns the committed in-sync replica set (a copy).
func (p *Partition) ISR() []int32 {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	return slices.Clone(p.repl.isr)
}

// FollowerLag is one follower's replication progress as the leader sees it.
type FollowerLag struct {
	Broker   int32
	LEO      int64 // -1: has not fetched since this leadership began
	Lag      int64 // leader log end offset minus LEO (records)
	InSync   bool
	LastSeen time.Time
}

// Followers reports every follower's progress; nil when not the leader.
func (p *Partition) Followers() []FollowerLag {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	if !p.leading.Load() {
		return nil
	}
	leo := p.log.LogEndOffset()
	var out []FollowerLag
	for _, id := range p.repl.replicas {
		f := p.repl.followers[id]
		if f == nil {
			continue
		}
		fl := FollowerLag{Broker: id, LEO: f.leo, InSync: slices.Contains(p.repl.isr, id)}
		if f.leo >= 0 {
			fl.Lag = max(0, leo-f.leo)
		} else {
			fl.Lag = leo - p.log.LogStartOffset()
		}
		if f.lastFetch > 0 {
			fl.LastSeen = time.UnixMilli(f.lastFetch)
		}
		out = append(out, fl)
	}
	return out
}

// applyPartition brings the replica in line with its metadata and reports
// the broker to fetch from: the leader's id when this replica is a
// follower, -1 when it leads or has no leader.
func (p *Partition) applyPartition(mp *metadata.Partition) int32 {
	self := p.mgr.cfg.NodeID
	leading := mp.Leader == self
	// Only applyPartition changes leading and leaderEpoch, and Apply
	// serialises it, so this look without locks is what the locked one
	// below finds. A demotion takes flushMu first: a write round in
	// progress finishes, so what is still staged never reached the log.
	demoting := p.leading.Load() && (!leading || p.leaderEpoch.Load() != mp.LeaderEpoch)
	if demoting {
		p.flushMu.Lock()
	}
	p.appendMu.Lock()
	wasLeading := p.leading.Load()
	epochChanged := p.leaderEpoch.Load() != mp.LeaderEpoch
	if wasLeading && (!leading || epochChanged) {
		// Demoted (or re-elected at a new epoch): producers still waiting
		// for acks of this leadership get an error, and batches not yet
		// written never will be. Appending them updated the producer
		// state (sequences, open transactions, markers applied), so it is
		// rebuilt from the log: else it would answer a retry of a dropped
		// batch as a duplicate, and a dropped marker would leave the
		// transaction closed here while the log, and the new leader, hold
		// it open, so the new leader's marker for it would get no
		// aborted-transaction entry on this replica.
		p.leaderGen.Store(p.gen.Add(1))
		if len(p.staged) > 0 {
			p.unstage()
			p.nextOffset = p.log.LogEndOffset()
			p.reloadProducers()
		}
	}
	if wasLeading != leading || epochChanged {
		p.syncMu.Lock()
		p.replicating = nil // the isr_wait of another leadership's writes
		p.syncMu.Unlock()
	}
	p.leaderEpoch.Store(mp.LeaderEpoch)
	p.leading.Store(leading)
	p.adding.Store(slices.Contains(mp.AddingReplicas, self))
	if leading && !wasLeading {
		p.nextOffset = p.log.LogEndOffset()
	}
	p.appendMu.Unlock()
	if demoting {
		p.flushMu.Unlock()
	}

	p.rmu.Lock()
	r := &p.repl
	newTerm := r.leader != mp.Leader || epochChanged
	r.leader = mp.Leader
	r.replicas = slices.Clone(mp.Replicas)
	r.isr = slices.Clone(mp.ISR)
	if r.partEpoch != mp.PartitionEpoch || newTerm {
		if r.pending != nil && sameMembers(r.pending, mp.ISR) {
			// Committed: the backoff ends here, not when the answer
			// reaches alterDone, which ignores it once a newer
			// proposal has started.
			r.alterBackoff = 0
		}
		r.pending = nil // the proposal was decided (or overtaken)
	}
	r.partEpoch = mp.PartitionEpoch
	if leading {
		if newTerm || r.followers == nil {
			r.followers = map[int32]*follower{}
			r.epochStart = p.log.LogEndOffset()
		}
		now := p.mgr.now().UnixMilli()
		for _, id := range r.replicas {
			if id != self && r.followers[id] == nil {
				// A new leader gives every follower the full lag time to
				// show up before it counts as out of sync.
				r.followers[id] = &follower{leo: -1, lastCaughtUp: now}
			}
		}
		for id := range r.followers {
			if !slices.Contains(r.replicas, id) {
				delete(r.followers, id)
			}
		}
	} else {
		r.followers = nil
	}
	p.rmu.Unlock()
	p.updateHW()
	p.notify()
	if leading || mp.Leader < 0 {
		return -1
	}
	return mp.Leader
}

// maximalISR is the ISR the high watermark must respect: the committed one
// and, while a change is pending, the proposed one too.
func (r *replState) maximalISR() []int32 {
	if r.pending == nil {
		return r.isr
	}
	out := slices.Clone(r.isr)
	for _, id := range r.pending {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// updateHW recomputes the leader's high watermark: the smallest of its own
// durable offset and every in-sync follower's fetch offset. It never moves
// backwards. A follower's high watermark is set by the fetcher.
func (p *Partition) updateHW() {
	p.rmu.Lock()
	if !p.leading.Load() {
		p.rmu.Unlock()
		return
	}
	self := p.mgr.cfg.NodeID
	hw := p.synced.Load()
	cur := p.hw.Load()
	for _, id := range p.repl.maximalISR() {
		if id == self {
			continue
		}
		f := p.repl.followers[id]
		if f == nil || f.leo < 0 {
			hw = min(hw, cur)
			continue
		}
		hw = min(hw, f.leo)
	}
	moved := hw > cur
	if moved {
		p.hw.Store(hw)
	}
	p.rmu.Unlock()
	if moved {
		p.observeReplicated(hw)
		p.notify()
	}
}

// FollowerFetch records that follower id fetched at offset: everything
// below it is in (and, with fsync, durable on) the follower's log. It
// moves the high watermark and asks the controller to add the follower to
// the ISR once it has caught up.
func (p *Partition) FollowerFetch(id int32, offset int64) error {
	if !p.leading.Load() {
		return ErrNotLeader
	}
	now := p.mgr.now().UnixMilli()
	leo := p.log.LogEndOffset()
	p.rmu.Lock()
	r := &p.repl
	f := r.followers[id]
	if f == nil {
		p.rmu.Unlock()
		return ErrNotReplica
	}
	switch {
	case offset >= leo:
		f.lastCaughtUp = now
	case f.lastFetch > 0 && offset >= f.leaderLEOAt:
		f.lastCaughtUp = f.lastFetch
	}
	f.leo, f.lastFetch, f.leaderLEOAt = offset, now, leo
	var propose []int32
	// Expand: an out-of-sync follower that has reached the high watermark
	// and the start of this leadership (so it holds every record this
	// leader may still have to commit below it) rejoins, if the metadata
	// lets it (KIP-841).
	if r.pending == nil && now >= r.alterRetryAt && !slices.Contains(r.isr, id) &&
		offset >= p.hw.Load() && offset >= r.epochStart && p.mgr.isrEligible(id) {
		propose = append(slices.Clone(r.isr), id)
		slices.Sort(propose)
		r.pending = propose
		r.alterSeq++
	}
	epoch, seq := r.partEpoch, r.alterSeq
	p.rmu.Unlock()
	p.updateHW()
	if propose != nil {
		p.mgr.Metrics.ISRExpands.Add(1)
		p.mgr.alterISR(p, propose, epoch, seq)
	}
	return nil
}

// checkISR shrinks the ISR of a leader whose followers fell behind: a
// follower that has not caught up with the leader for lagMax leaves.
func (p *Partition) checkISR(now int64, lagMax time.Duration) {
	if !p.leading.Load() {
		return
	}
	self := p.mgr.cfg.NodeID
	p.rmu.Lock()
	r := &p.repl
	if r.pending != nil || now < r.alterRetryAt {
		p.rmu.Unlock()
		return
	}
	var keep []int32
	for _, id := range r.isr {
		f := r.followers[id]
		if id == self || f == nil || now-f.lastCaughtUp <= lagMax.Milliseconds() {
			keep = append(keep, id)
		}
	}
	if len(keep) == len(r.isr) {
		p.rmu.Unlock()
		return
	}
	r.pending = keep
	r.alterSeq++
	epoch, seq := r.partEpoch, r.alterSeq
	p.rmu.Unlock()
	p.mgr.Metrics.ISRShrinks.Add(1)
	p.mgr.alterISR(p, keep, epoch, seq)
}

// alterDone takes the answer to ISR proposal seq. A committed one is
// cleared from pending by the new image; a failed one is cleared here,
// and the partition waits before proposing again. The answer to a
// proposal that a newer one replaced changes nothing.
func (p *Partition) alterDone(seq uint64, err error) {
	p.rmu.Lock()
	r := &p.repl
	if seq != r.alterSeq {
		p.rmu.Unlock()
		return
	}
	if err == nil {
		r.alterBackoff = 0
		p.rmu.Unlock()
		return
	}
	r.pending = nil
	r.alterBackoff = min(max(2*r.alterBackoff, alterBackoffMin), alterBackoffMax)
	r.alterRetryAt = p.mgr.now().UnixMilli() + r.alterBackoff.Milliseconds()
	p.rmu.Unlock()
	p.updateHW()
}

// minISRCheck reports whether a write acknowledged with acks=all may be
// answered: the committed ISR still meets min.insync.replicas.
func (p *Partition) minISRCheck() error {
	min := p.cfg.Load().MinInsyncReplicas
	p.rmu.Lock()
	n := len(p.repl.isr)
	p.rmu.Unlock()
	if n < min {
		return ErrNotEnoughReplicasAfterAppend
	}
	return nil
}

// ReadReplica serves follower id's fetch at offset: it records the
// follower's progress (FollowerFetch) and returns batches from offset up to
// the log end offset (written, not necessarily committed), since the
// follower copies the log rather than consuming it. An offset outside the
// log is ErrInvalidOffset (OFFSET_OUT_OF_RANGE), with the log start offset
// in the result so the follower can tell "behind" from "diverged".
func (p *Partition) ReadReplica(id int32, offset int64, maxBytes int32, alloc func(int) []byte) (ReadResult, error) {
	r := ReadResult{LogStartOffset: p.log.LogStartOffset(), LogEndOffset: p.log.LogEndOffset()}
	if offset < r.LogStartOffset || offset > r.LogEndOffset {
		r.HighWatermark = p.hw.Load()
		return r, fmt.Errorf("%w: follower %d fetches at %d, log is [%d, %d]", ErrInvalidOffset, id, offset, r.LogStartOffset, r.LogEndOffset)
	}
	if err := p.FollowerFetch(id, offset); err != nil {
		r.HighWatermark = p.hw.Load()
		return r, err
	}
	r.HighWatermark = p.hw.Load()
	if offset == r.LogEndOffset {
		return r, nil
	}
	data, err := p.log.ReadWith(alloc, offset, maxBytes, r.LogEndOffset, true)
	if err != nil {
		return r, err
	}
	r.Records = data
	return r, nil
}

// sameMembers reports whether a and b hold the same broker ids.
func sameMembers(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
