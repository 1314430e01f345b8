package share

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// RecordState is the delivery state of an in-flight record. The numbers are
// Kafka's RecordState ids; Acquired is never persisted (see persisted).
type RecordState int8

const (
	Available    RecordState = 0
	Acquired     RecordState = 1
	Acknowledged RecordState = 2
	Archiving    RecordState = 3 // KIP-1191: archived once its DLQ write is done
	Archived     RecordState = 4
)

func (s RecordState) String() string {
	switch s {
	case Available:
		return "available"
	case Acquired:
		return "acquired"
	case Acknowledged:
		return "acknowledged"
	case Archiving:
		return "archiving"
	case Archived:
		return "archived"
	}
	return fmt.Sprintf("state(%d)", int8(s))
}

// Reason says why a record is archived through the DLQ.
type Reason int8

const (
	ReasonNone          Reason = 0
	ReasonRejected      Reason = 1 // a consumer acknowledged it with REJECT
	ReasonDeliveryLimit Reason = 2 // its delivery count reached share.delivery.count.limit
)

// String is the reason as written in the berthmsg.HeaderDLQReason header.
func (r Reason) String() string {
	switch r {
	case ReasonNone:
		return "none"
	case ReasonRejected:
		return "rejected"
	case ReasonDeliveryLimit:
		return "delivery limit reached"
	}
	return fmt.Sprintf("reason(%d)", int8(r))
}

// Message is the berthmsg.HeaderDLQMessage text, Kafka's (ShareGroupDLQThrowable).
func (r Reason) Message() string {
	switch r {
	case ReasonRejected:
		return "Offset rejected by client."
	case ReasonDeliveryLimit:
		return "Offset delivery count exceeded the threshold."
	}
	return ""
}

// AckType is an acknowledgement type of ShareFetch and ShareAcknowledge.
type AckType int8

const (
	AckGap     AckType = 0 // the offset holds no record (compacted, control)
	AckAccept  AckType = 1
	AckRelease AckType = 2
	AckReject  AckType = 3
	AckRenew   AckType = 4 // KIP-1222: extend the acquisition lock
)

// Package errors; the handlers map them to Kafka codes.
var (
	// ErrInvalidAck: a malformed acknowledgement (INVALID_REQUEST).
	ErrInvalidAck = errors.New("share: invalid acknowledgement")
	// ErrInvalidRecordState: an acknowledged record is not acquired by
	// the member, or a record to complete is not archiving
	// (INVALID_RECORD_STATE).
	ErrInvalidRecordState = errors.New("share: invalid record state")
)

// LogBatch is an offset range present in the log: a record batch's first
// and last offset. Skip marks a batch whose records are never delivered:
// a control batch (transaction marker), or, for a read_committed group
// (share.isolation.level), a batch of an aborted transaction. Acquire
// archives its offsets as it passes them, so the start offset moves past
// them.
type LogBatch struct {
	First, Last int64
	Skip        bool
}

// AcquiredRange is a range of records handed to a member, with the
// delivery count of each (ShareFetchResponse's AcquiredRecords).
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int
}

// Ack acknowledges [First, Last]: Types holds one type for the whole
// range or one per offset.
type Ack struct {
	First, Last int64
	Types       []AckType
	// ErrorText is the consumer's error and stack for a REJECT (Berth's
	// addition; stock clients send none). It travels to the DLQ action.
	ErrorText string
}

// DLQAction asks the caller to write the records [First, Last] of the
// source partition to the group's DLQ topic, with the context headers
// (berthmsg.HeaderDLQ*), and then to call CompleteArchive for the range.
type DLQAction struct {
	First, Last   int64
	Reason        Reason
	DeliveryCount int
	ErrorText     string
}

// StateChange is what a state change asks of the caller: persist Update in
// __share_group_state (when not empty) before answering the request or
// acting on DLQ, then execute the DLQ actions.
type StateChange struct {
	Update Update
	DLQ    []DLQAction
}

// recState is everything about a record but its offset; runs of records
// with equal recState are kept as one.
type recState struct {
	state       RecordState
	count       int    // delivery count
	member      string // Acquired: the holder
	deadline    int64  // Acquired: lock deadline (ms since the epoch)
	availableAt int64  // Available: acquirable from (ms; 0: at once)
	reason      Reason // Archiving
	errText     string // Archiving
}

type run struct {
	first, last int64
	recState
}

// Key names a share-partition: a share group's view of one partition of
// a topic (by topic id).
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// SharePartition is the state of one share-partition (group, topic,
// partition): the in-flight window [start, end) of records as runs.
// It does no I/O, reads no clock and draws jitter only from the source it
// was given, so the same calls give the same results. It is not safe for
// concurrent use: its owner (one goroutine or one mutex per
// share-partition) serialises the calls.
type SharePartition struct {
	cfg         PartitionConfig
	rnd         func() float64
	stateEpoch  int32
	leaderEpoch int32
	start, end  int64
	// runs cover [start, end) exactly, in order, adjacent runs differ.
	runs []run

	// counters since creation (metrics)
	redeliveries   uint64
	dlqWritten     uint64
	rejected       uint64
	deliveryLimits uint64

	// per call
	runLen     int64 // records in the run apply is changing (archive counts them)
	dirty      [][2]int64
	dlq        []DLQAction
	startMoved bool
}

// New returns an empty share-partition starting at start, the offset
// share.auto.offset.reset chose (earliest: the log start offset; latest:
// the high watermark; by_duration: ListOffsets by timestamp). rnd returns
// draws from [0, 1) for the backoff jitter; nil means no jitter.
func NewPartition(cfg PartitionConfig, start int64, rnd func() float64) *SharePartition {
	if rnd == nil {
		rnd = func() float64 { return 0.5 }
	}
	return &SharePartition{cfg: cfg, rnd: rnd, start: start, end: start}
}

// StartOffset is the share-partition start offset (SPSO): every record
// below it is acknowledged or archived.
func (p *SharePartition) StartOffset() int64 { return p.start }

// Reconfigure applies changed settings (a group config changed): they
// govern what happens from now on; records already in flight keep their
// lock deadlines and retry times.
func (p *SharePartition) Reconfigure(cfg PartitionConfig) { p.cfg = cfg }

// EndOffset is one past the last in-flight offset: Kafka's SPEO plus one
// (equal to StartOffset when nothing is in flight). The next new record
// to acquire is at EndOffset.
func (p *SharePartition) EndOffset() int64 { return p.end }

// StateEpoch and LeaderEpoch are carried into snapshots and updates.
func (p *SharePartition) StateEpoch() int32 { return p.stateEpoch }

// SetLeaderEpoch sets the leader epoch written in later snapshots and
// updates.
func (p *SharePartition) SetLeaderEpoch(e int32) { p.leaderEpoch = e }

func ms(t time.Time) int64 { return t.UnixMilli() }

// NextFetchOffset is where the caller reads the log from to serve an
// acquisition at now: the first available record whose backoff is over,
// else EndOffset. ok is false when nothing can be acquired (every record
// in flight is busy and the window is full).
func (p *SharePartition) NextFetchOffset(now time.Time) (offset int64, ok bool) {
	n := ms(now)
	for _, r := range p.runs {
		if r.state == Available && r.availableAt <= n {
			return r.first, true
		}
	}
	if p.end-p.start < int64(p.cfg.MaxRecordLocks) {
		return p.end, true
	}
	return -1, false
}

// Acquire hands records to member. fetched are the batches the caller
// read from the log, in order, from NextFetchOffset on (every batch as
// read, up to its byte limit; control batches may be left out, or given
// with Skip): in the window, available records whose backoff is over are
// acquired; past EndOffset, new records are acquired as long as the
// window holds fewer than MaxRecordLocks offsets, and the offsets between
// fetched batches are archived as gaps. At most maxRecords records are
// acquired, in offset order; each one's delivery count goes up by one and
// its lock lasts LockDuration. An available record already at the
// delivery limit (possible after a restart lost its last lock) is
// archived instead, and so is every available or new record of a Skip
// batch (it counts toward neither maxRecords nor, once the start offset
// passes it, the window).
func (p *SharePartition) Acquire(member string, fetched []LogBatch, maxRecords int, now time.Time) ([]AcquiredRange, StateChange) {
	p.begin()
	n := ms(now)
	acq := recState{state: Acquired, member: member, deadline: n + p.cfg.LockDuration.Milliseconds()}
	var out []AcquiredRange
	taken := 0
	add := func(first, last int64, count int) {
		if count > 1 {
			p.redeliveries += uint64(last - first + 1)
		}
		if k := len(out); k > 0 && out[k-1].Last == first-1 && out[k-1].DeliveryCount == count {
			out[k-1].Last = last
			return
		}
		out = append(out, AcquiredRange{first, last, count})
	}

	// In the window: collect the ranges first, then change them.
	type piece struct {
		first, last int64
		skip        bool
	}
	var pieces []piece
	j := 0 // runs and fetched are both in offset order
	for _, r := range p.runs {
		if taken >= maxRecords {
			break
		}
		if r.state != Available || r.availableAt > n {
			continue
		}
		for j < len(fetched) && fetched[j].Last < r.first {
			j++
		}
		for _, b := range fetched[j:] {
			if b.First > r.last {
				break
			}
			a, z := max(b.First, r.first), min(b.Last, r.last)
			if a > z {
				continue
			}
			if !b.Skip && r.count < p.cfg.DeliveryCountLimit {
				z = min(z, a+int64(maxRecords-taken)-1)
				taken += int(z - a + 1)
			}
			pieces = append(pieces, piece{a, z, b.Skip})
			if taken >= maxRecords {
				break
			}
		}
	}
	for _, pc := range pieces {
		p.apply(pc.first, pc.last, func(rs recState) recState {
			switch {
			case pc.skip:
				return recState{state: Archived, count: rs.count}
			case rs.count >= p.cfg.DeliveryCountLimit:
				return p.archive(rs, ReasonDeliveryLimit, "")
			}
			c := acq
			c.count = rs.count + 1
			return c
		})
	}
	for _, pc := range pieces {
		if pc.skip {
			continue
		}
		for _, r := range p.runs {
			if r.state == Acquired && r.member == member && r.deadline == acq.deadline && r.first <= pc.last && r.last >= pc.first {
				add(max(r.first, pc.first), min(r.last, pc.last), r.count)
			}
		}
	}

	// Past the window: new records, gaps between batches archived.
	for _, b := range fetched {
		if taken >= maxRecords || p.end-p.start >= int64(p.cfg.MaxRecordLocks) {
			break
		}
		if b.Last < p.end {
			continue
		}
		a := max(b.First, p.end)
		if a > p.end {
			p.extend(a-1, recState{state: Archived})
		}
		if b.Skip {
			p.extend(b.Last, recState{state: Archived})
			continue
		}
		room := int64(p.cfg.MaxRecordLocks) - (p.end - p.start)
		k := min(b.Last-a+1, int64(maxRecords-taken), room)
		if k <= 0 {
			break
		}
		c := acq
		c.count = 1
		p.extend(a+k-1, c)
		taken += int(k)
		add(a, a+k-1, 1)
	}
	return out, p.finish()
}

// Acknowledge applies a member's acknowledgements, all or nothing as
// Kafka does: every offset at or past StartOffset in acks must be
// acquired by member under a lock that has not expired at now (even if
// Expire has not run yet), else nothing changes and the error (wrapping
// ErrInvalidRecordState) names the first offending offset. Offsets below
// StartOffset are ignored (already finished). ACCEPT acknowledges;
// RELEASE makes the record available after its backoff (or archives it at
// the delivery limit); REJECT archives it with reason rejected; a gap
// archives it without DLQ; RENEW extends its lock by LockDuration.
func (p *SharePartition) Acknowledge(member string, acks []Ack, now time.Time) (StateChange, error) {
	prev := int64(-1)
	for i, a := range acks {
		if a.First <= prev {
			return StateChange{}, fmt.Errorf("%w: batch %d at offset %d overlaps or precedes the one before", ErrInvalidAck, i, a.First)
		}
		if a.First > a.Last || len(a.Types) == 0 ||
			(len(a.Types) > 1 && int64(len(a.Types)) != a.Last-a.First+1) {
			return StateChange{}, fmt.Errorf("%w: batch %d [%d, %d] with %d types", ErrInvalidAck, i, a.First, a.Last, len(a.Types))
		}
		for _, t := range a.Types {
			if t < AckGap || t > AckRenew {
				return StateChange{}, fmt.Errorf("%w: acknowledge type %d", ErrInvalidAck, t)
			}
		}
		prev = a.Last
	}
	n := ms(now)
	for _, a := range acks {
		if err := p.checkAcquired(member, max(a.First, p.start), a.Last, n); err != nil {
			return StateChange{}, err
		}
	}
	p.begin()
	for _, a := range acks {
		for first := a.First; first <= a.Last; {
			t := a.Types[0]
			last := a.Last
			if len(a.Types) > 1 {
				t = a.Types[first-a.First]
				last = first
				for last < a.Last && a.Types[last+1-a.First] == t {
					last++
				}
			}
			if last >= p.start {
				p.ack(max(first, p.start), last, t, a.ErrorText, n)
			}
			first = last + 1
		}
	}
	return p.finish(), nil
}

func (p *SharePartition) checkAcquired(member string, first, last, now int64) error {
	if first > last {
		return nil
	}
	if last >= p.end {
		return fmt.Errorf("%w: offset %d is not in flight (end offset %d)", ErrInvalidRecordState, max(first, p.end), p.end)
	}
	for _, r := range p.runs {
		if r.last < first || r.first > last {
			continue
		}
		if r.state != Acquired || r.member != member {
			who := ""
			if r.state == Acquired {
				who = " by another member"
			}
			return fmt.Errorf("%w: offset %d is %s%s", ErrInvalidRecordState, max(r.first, first), r.state, who)
		}
		if r.deadline <= now {
			return fmt.Errorf("%w: the lock of offset %d expired at %s", ErrInvalidRecordState, max(r.first, first), time.UnixMilli(r.deadline).UTC().Format(time.RFC3339Nano))
		}
	}
	return nil
}

func (p *SharePartition) ack(first, last int64, t AckType, errText string, now int64) {
	p.apply(first, last, func(rs recState) recState {
		switch t {
		case AckGap:
			return recState{state: Archived, count: rs.count}
		case AckAccept:
			return recState{state: Acknowledged, count: rs.count}
		case AckRelease:
			return p.fail(rs, now)
		case AckReject:
			return p.archive(rs, ReasonRejected, errText)
		case AckRenew:
			rs.deadline = now + p.cfg.LockDuration.Milliseconds()
		}
		return rs
	})
}

// fail ends a delivery that did not succeed (release, lock expiry,
// member gone) at time at: available again after the backoff, or
// archived at the delivery limit.
func (p *SharePartition) fail(rs recState, at int64) recState {
	if rs.count >= p.cfg.DeliveryCountLimit {
		return p.archive(rs, ReasonDeliveryLimit, "")
	}
	d := p.cfg.Backoff.Delay(rs.count, p.rnd())
	return recState{state: Available, count: rs.count, availableAt: at + d.Milliseconds()}
}

// archive finishes a record through the DLQ (Archiving, with an action)
// when the group has one, else archives it at once.
func (p *SharePartition) archive(rs recState, reason Reason, errText string) recState {
	switch reason { // per record: called once per run, from apply
	case ReasonRejected:
		p.rejected += uint64(p.runLen)
	case ReasonDeliveryLimit:
		p.deliveryLimits += uint64(p.runLen)
	}
	if !p.cfg.DeadLetter {
		return recState{state: Archived, count: rs.count}
	}
	errText = cmp.Or(errText, rs.errText) // the member's annotation (annotate.go) when the ack has none
	if n := p.cfg.MaxErrorText; len(errText) > n {
		for n > 0 && !utf8.RuneStart(errText[n]) {
			n--
		}
		errText = errText[:n]
	}
	return recState{state: Archiving, count: rs.count, reason: reason, errText: errText}
}

// Expire ends the locks whose deadline is at or before now: each record
// becomes available at deadline + backoff, or is archived at the
// delivery limit.
func (p *SharePartition) Expire(now time.Time) StateChange {
	p.begin()
	n := ms(now)
	for i := 0; i < len(p.runs); i++ {
		r := p.runs[i]
		if r.state == Acquired && r.deadline <= n {
			p.apply(r.first, r.last, func(rs recState) recState { return p.fail(rs, rs.deadline) })
			i = p.find(r.first)
		}
	}
	return p.finish()
}

// MemberGone releases every record member holds, as a failed delivery
// (backoff, delivery limit), at now.
func (p *SharePartition) MemberGone(member string, now time.Time) StateChange {
	p.begin()
	n := ms(now)
	for i := 0; i < len(p.runs); i++ {
		r := p.runs[i]
		if r.state == Acquired && r.member == member {
			p.apply(r.first, r.last, func(rs recState) recState { return p.fail(rs, n) })
			i = p.find(r.first)
		}
	}
	return p.finish()
}

// CompleteArchive archives the Archiving records [first, last] once the
// caller's DLQ write for them is durable. Offsets below StartOffset are
// ignored; any other offset in the range that is not Archiving is an
// error (ErrInvalidRecordState) and nothing changes.
func (p *SharePartition) CompleteArchive(first, last int64) (StateChange, error) {
	first = max(first, p.start)
	if first <= last {
		if last >= p.end {
			return StateChange{}, fmt.Errorf("%w: offset %d is not in flight", ErrInvalidRecordState, max(first, p.end))
		}
		for _, r := range p.runs {
			if r.last >= first && r.first <= last && r.state != Archiving {
				return StateChange{}, fmt.Errorf("%w: offset %d is %s, not archiving", ErrInvalidRecordState, max(r.first, first), r.state)
			}
		}
	}
	p.begin()
	if first <= last {
		p.dlqWritten += uint64(last - first + 1)
		p.apply(first, last, func(rs recState) recState { return recState{state: Archived, count: rs.count} })
	}
	return p.finish(), nil
}

// PendingDLQ returns the DLQ actions of every Archiving record: after a
// restart or a leader change, the caller writes them again (at least
// once: a record may be parked twice, never lost).
func (p *SharePartition) PendingDLQ() []DLQAction {
	var out []DLQAction
	for _, r := range p.runs {
		if r.state == Archiving {
			out = appendAction(out, DLQAction{r.first, r.last, r.reason, r.count, r.errText})
		}
	}
	return out
}

// AdvanceLogStart moves StartOffset up to the log start offset when
// retention or DeleteRecords removed records below it; in-flight records
// there are dropped (an Archiving record there has no record left to
// park).
func (p *SharePartition) AdvanceLogStart(logStart int64) StateChange {
	p.begin()
	if logStart > p.start {
		p.trim(logStart)
		p.startMoved = true
	}
	return p.finish()
}

// NextDeadline is the earliest time after now at which a lock expires or
// a record's backoff ends: when to call Expire and retry waiting
// fetches.
func (p *SharePartition) NextDeadline(now time.Time) (time.Time, bool) {
	n := ms(now)
	best := int64(-1)
	for _, r := range p.runs {
		t := int64(-1)
		switch {
		case r.state == Acquired:
			t = r.deadline
		case r.state == Available && r.availableAt > n:
			t = r.availableAt
		}
		if t >= 0 && (best < 0 || t < best) {
			best = t
		}
	}
	if best < 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(best), true
}

// PartitionStats are the inputs of the share-group metrics for this partition.
// Records past EndOffset (in the log, never fetched) are not counted:
// the caller adds the log's high watermark minus EndOffset to Available.
type PartitionStats struct {
	StartOffset, EndOffset int64
	Available              int64 // available now
	Delayed                int64 // available once their backoff ends
	Acquired               int64
	Acknowledged           int64 // in the window, not yet past StartOffset
	Archiving              int64
	Archived               int64
	// OldestAvailableSince is when the oldest record available now became
	// available (zero if none or unknown): its age is now minus this.
	OldestAvailableSince time.Time
	// Counters since this SharePartition was created or loaded.
	Redeliveries   uint64 // records acquired with a delivery count above 1
	DLQWritten     uint64 // records archived after their DLQ write
	Rejected       uint64 // records rejected by a consumer
	DeliveryLimits uint64 // records that reached the delivery limit
}

// Stats returns the metrics inputs at now.
func (p *SharePartition) Stats(now time.Time) PartitionStats {
	n := ms(now)
	s := PartitionStats{StartOffset: p.start, EndOffset: p.end, Redeliveries: p.redeliveries,
		DLQWritten: p.dlqWritten, Rejected: p.rejected, DeliveryLimits: p.deliveryLimits}
	oldest := int64(-1)
	for _, r := range p.runs {
		c := r.last - r.first + 1
		switch r.state {
		case Available:
			if r.availableAt > n {
				s.Delayed += c
				continue
			}
			s.Available += c
			if r.availableAt > 0 && (oldest < 0 || r.availableAt < oldest) {
				oldest = r.availableAt
			}
		case Acquired:
			s.Acquired += c
		case Acknowledged:
			s.Acknowledged += c
		case Archiving:
			s.Archiving += c
		case Archived:
			s.Archived += c
		}
	}
	if oldest >= 0 {
		s.OldestAvailableSince = time.UnixMilli(oldest)
	}
	return s
}

// --- run bookkeeping -------------------------------------------------

func (p *SharePartition) begin() {
	p.dirty = p.dirty[:0]
	p.dlq = nil
	p.startMoved = false
}

// finish advances the start offset over finished records and builds the
// call's result.
func (p *SharePartition) finish() StateChange {
	for len(p.runs) > 0 && (p.runs[0].state == Acknowledged || p.runs[0].state == Archived) {
		p.start = p.runs[0].last + 1
		p.runs = p.runs[1:]
		p.startMoved = true
	}
	if len(p.runs) == 0 {
		p.runs = nil // let the backing array go
	}
	res := StateChange{DLQ: p.dlq, Update: Update{StartOffset: -1, LeaderEpoch: p.leaderEpoch, StateEpoch: p.stateEpoch}}
	if p.startMoved {
		res.Update.StartOffset = p.start
	}
	for _, d := range mergeRanges(p.dirty) {
		first, last := max(d[0], p.start), d[1]
		if first > last {
			continue
		}
		for _, r := range p.runs {
			if r.last < first || r.first > last {
				continue
			}
			res.Update.StateBatches = appendBatch(res.Update.StateBatches, p.persisted(run{max(r.first, first), min(r.last, last), r.recState}))
		}
	}
	if !res.Update.Empty() {
		res.Update.DeliveryCompleteCount = p.deliveryComplete()
	}
	p.dirty, p.dlq = p.dirty[:0], nil
	return res
}

func (p *SharePartition) deliveryComplete() int32 {
	var n int64
	for _, r := range p.runs {
		if r.state == Acknowledged || r.state == Archived {
			n += r.last - r.first + 1
		}
	}
	return int32(min(n, 1<<31-1))
}

// persisted is a run's persisted form. An acquired record is persisted
// as available when its lock would have expired, plus the nominal
// (unjittered) backoff: a restart loses the lock but neither the
// delivery nor the backoff.
func (p *SharePartition) persisted(r run) StateBatch {
	b := StateBatch{FirstOffset: r.first, LastOffset: r.last, DeliveryState: int8(r.state), DeliveryCount: int16(r.count)}
	switch r.state {
	case Available:
		b.AvailableAtMs = r.availableAt
	case Acquired:
		b.DeliveryState = int8(Available)
		b.AvailableAtMs = r.deadline + p.cfg.Backoff.Delay(r.count, 0.5).Milliseconds()
	case Archiving:
		b.Reason, b.ErrorText = r.reason, r.errText
	}
	return b
}

// find returns the index of the run holding offset, or len(runs).
func (p *SharePartition) find(offset int64) int {
	lo, hi := 0, len(p.runs)
	for lo < hi {
		m := (lo + hi) / 2
		if p.runs[m].last < offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// split makes offset the first of a run (when inside the window).
func (p *SharePartition) split(offset int64) {
	i := p.find(offset)
	if i == len(p.runs) || p.runs[i].first == offset {
		return
	}
	r := p.runs[i]
	p.runs = append(p.runs, run{})
	copy(p.runs[i+2:], p.runs[i+1:])
	p.runs[i] = run{r.first, offset - 1, r.recState}
	p.runs[i+1] = run{offset, r.last, r.recState}
}

// apply replaces the state of every record in [first, last] (inside the
// window) by f of it, then merges equal neighbours.
func (p *SharePartition) apply(first, last int64, f func(recState) recState) {
	first, last = max(first, p.start), min(last, p.end-1)
	if first > last {
		return
	}
	p.split(first)
	p.split(last + 1)
	for i := p.find(first); i < len(p.runs) && p.runs[i].first <= last; i++ {
		r := &p.runs[i]
		p.runLen = r.last - r.first + 1
		r.recState = f(r.recState)
		if r.state == Archiving {
			p.dlq = appendAction(p.dlq, DLQAction{r.first, r.last, r.reason, r.count, r.errText})
		}
	}
	p.dirty = append(p.dirty, [2]int64{first, last})
	p.merge()
}

// extend appends [end, last] with state rs to the window.
func (p *SharePartition) extend(last int64, rs recState) {
	p.runs = append(p.runs, run{p.end, last, rs})
	p.dirty = append(p.dirty, [2]int64{p.end, last})
	p.end = last + 1
	p.merge()
}

// trim drops everything below offset and moves start (and end) up to it.
func (p *SharePartition) trim(offset int64) {
	if offset <= p.start {
		return
	}
	p.split(offset)
	p.runs = p.runs[p.find(offset):]
	p.start = offset
	if p.end < offset {
		p.end = offset
	}
}

func (p *SharePartition) merge() {
	out := p.runs[:0]
	for _, r := range p.runs {
		if k := len(out); k > 0 && out[k-1].recState == r.recState && out[k-1].last+1 == r.first {
			out[k-1].last = r.last
			continue
		}
		out = append(out, r)
	}
	p.runs = out
}

func appendAction(out []DLQAction, a DLQAction) []DLQAction {
	if k := len(out); k > 0 {
		l := &out[k-1]
		if l.Last+1 == a.First && l.Reason == a.Reason && l.DeliveryCount == a.DeliveryCount && l.ErrorText == a.ErrorText {
			l.Last = a.Last
			return out
		}
	}
	return append(out, a)
}

// mergeRanges sorts and coalesces overlapping or adjacent ranges.
func mergeRanges(rs [][2]int64) [][2]int64 {
	slices.SortFunc(rs, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	out := rs[:0]
	for _, r := range rs {
		if k := len(out); k > 0 && r[0] <= out[k-1][1]+1 {
			out[k-1][1] = max(out[k-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}
