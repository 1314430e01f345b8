package txn

import (
	"errors"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/metadata"
)

// Allocator hands out a new producer id (in Berth, a block from the
// metadata log). It is called only when a transactional id needs one.
type Allocator func() (int64, error)

// Partition is the coordinator state of one __transaction_state
// partition: the metadata of every transactional id placed on it. It is
// pure: no I/O, no clock (every call takes now). Not safe for concurrent
// use: one mutex of the caller's owns it and serialises every call.
type Partition struct {
	cfg   Config
	alloc Allocator
	txns  map[string]*Txn
}

// NewPartition returns an empty partition; Replay its records to load it.
func NewPartition(cfg Config, alloc Allocator) *Partition {
	return &Partition{cfg: cfg, alloc: alloc, txns: make(map[string]*Txn)}
}

// Markers is the WriteTxnMarkers work of one transaction: write a COMMIT
// or ABORT marker for ProducerID/ProducerEpoch to each partition (through
// its leader, with the coordinator epoch, the leader epoch of this
// __transaction_state partition), then call MarkersDone. A partition
// whose topic was deleted counts as done.
type Markers struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Commit          bool
	Partitions      []TopicPartition
}

// Result is the outcome of an operation. Err is the response's error
// code (a *kerr.Error) or nil. Records are to be appended, in order, to
// this __transaction_state partition; the response waits until they are
// durable (acks=all). Markers are to be sent once the records are
// durable. ProducerID and ProducerEpoch are the ones to return.
//
// The state has already changed when the result is returned: if the
// append fails, the caller must drop this Partition and rebuild it from
// the log (NewPartition + Replay), answering the request with a
// retriable error (NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE).
type Result struct {
	Err           error
	ProducerID    int64
	ProducerEpoch int16
	Records       []Record
	Markers       []Markers
}

func fail(err error) Result {
	return Result{Err: err, ProducerID: NoProducerID, ProducerEpoch: NoEpoch}
}

func (r *Result) write(t *Txn) {
	r.Records = append(r.Records, record(t))
}

func (p *Partition) ids() []string { return slices.Sorted(maps.Keys(p.txns)) }

// Get returns a copy of id's metadata.
func (p *Partition) Get(id string) (Txn, bool) {
	t, ok := p.txns[id]
	if !ok {
		return Txn{}, false
	}
	return *t.clone(), true
}

// All returns a copy of every transaction's metadata, sorted by id.
func (p *Partition) All() []Txn {
	out := make([]Txn, 0, len(p.txns))
	for _, id := range p.ids() {
		out = append(out, *p.txns[id].clone())
	}
	return out
}

func (p *Partition) allocate() (int64, error) {
	pid, err := p.alloc()
	if err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return 0, ke
		}
		return 0, kerr.CoordinatorNotAvailable
	}
	return pid, nil
}

// transition records the state change common to every write: the
// previous producer id is the one before the change (as Kafka's
// TxnTransitMetadata has it) and the update time is now.
func (t *Txn) transition(now int64) {
	t.PrevProducerID = t.ProducerID
	t.LastUpdateMs = now
}

// InitRequest is an InitProducerId with a transactional id.
type InitRequest struct {
	TransactionalID string
	TimeoutMs       int32
	// ProducerID and ProducerEpoch are the client's current ones (v3+,
	// KIP-360), or NoProducerID and NoEpoch.
	ProducerID    int64
	ProducerEpoch int16
}

// InitProducerID is InitProducerId with a transactional id: a new id gets
// a producer id from the allocator and epoch 0; a known one gets its
// epoch bumped, which fences the previous producer. An ongoing
// transaction is aborted first (its epoch bumped, so its producer is
// fenced) and the answer is CONCURRENT_TRANSACTIONS: the client retries
// and gets the next epoch once the abort completed. When the epoch is
// exhausted the id gets a new producer id at epoch 0.
func (p *Partition) InitProducerID(r InitRequest, now time.Time) Result {
	if r.TransactionalID == "" {
		return fail(kerr.InvalidRequest)
	}
	if r.TimeoutMs <= 0 || int64(r.TimeoutMs) > p.cfg.MaxTimeout.Milliseconds() {
		return fail(kerr.InvalidTransactionTimeout)
	}
	ms := now.UnixMilli()
	expected := r.ProducerID != NoProducerID
	t, ok := p.txns[r.TransactionalID]
	if !ok {
		pid, err := p.allocate()
		if err != nil {
			return fail(err)
		}
		t = &Txn{
			ID: r.TransactionalID, ProducerID: pid, ProducerEpoch: 0,
			PrevProducerID: pid, NextProducerID: NoProducerID, LastProducerEpoch: NoEpoch,
			TimeoutMs: r.TimeoutMs, Status: Empty, StartMs: -1, LastUpdateMs: ms,
		}
		p.txns[t.ID] = t
		res := Result{ProducerID: pid, ProducerEpoch: 0}
		res.write(t)
		return res
	}
	// KIP-360: a client presenting its producer id must still own the
	// transactional id: the current producer id (or the next one, which
	// a Transactions V2 client holds while the transaction that
	// exhausted the epoch completes), or the one before a rotation it
	// retries with its exhausted epoch.
	if expected && t.ProducerEpoch != NoEpoch && !t.knows(r.ProducerID) &&
		!(r.ProducerID == t.PrevProducerID && exhausted(r.ProducerEpoch)) {
		return fail(kerr.ProducerFenced)
	}
	switch t.Status {
	case PrepareCommit, PrepareAbort, Dead, PrepareEpochFence:
		return fail(kerr.ConcurrentTransactions)
	case Ongoing:
		res := fail(kerr.ConcurrentTransactions)
		p.fenceAndAbort(t, ms, &res)
		return res
	}
	var res Result
	switch {
	case exhausted(t.ProducerEpoch) && (!expected || r.ProducerEpoch == t.ProducerEpoch):
		pid, err := p.allocate()
		if err != nil {
			return fail(err)
		}
		last := NoEpoch
		if expected {
			last = t.ProducerEpoch
		}
		t.transition(ms)
		t.ProducerID, t.ProducerEpoch, t.LastProducerEpoch = pid, 0, last
	case !expected:
		t.transition(ms)
		t.ProducerEpoch, t.LastProducerEpoch = t.ProducerEpoch+1, NoEpoch
	case r.ProducerEpoch == t.ProducerEpoch && !exhausted(t.ProducerEpoch):
		// The producer continues after an error and nobody fenced it.
		t.transition(ms)
		t.ProducerEpoch, t.LastProducerEpoch = t.ProducerEpoch+1, t.ProducerEpoch
	case r.ProducerEpoch == t.LastProducerEpoch && t.ProducerEpoch < math.MaxInt16:
		// A retry of a bump that succeeded: the same epoch again (never
		// MaxInt16, which only a fence reaches and no client is given).
		t.transition(ms)
	default:
		return fail(kerr.ProducerFenced)
	}
	t.Status, t.Partitions, t.Groups, t.StartMs = Empty, nil, nil, -1
	t.TimeoutMs, t.NextProducerID = r.TimeoutMs, NoProducerID
	res.ProducerID, res.ProducerEpoch = t.ProducerID, t.ProducerEpoch
	res.write(t)
	return res
}

// fenceAndAbort aborts t's ongoing transaction with a bumped epoch, so
// that its producer is fenced and the markers override its batches. A
// Transactions V2 transaction gets the end-of-transaction bump on top, as
// Kafka does, so its producer is fenced too (its abort with the old
// epoch is not taken for a retry). The epoch never passes MaxInt16.
func (p *Partition) fenceAndAbort(t *Txn, ms int64, res *Result) {
	t.transition(ms)
	if t.ProducerEpoch < math.MaxInt16 {
		t.ProducerEpoch++
	}
	t.LastProducerEpoch, t.NextProducerID = NoEpoch, NoProducerID
	if t.ClientVersion >= TV2 && t.ProducerEpoch < math.MaxInt16 {
		t.LastProducerEpoch = t.ProducerEpoch
		t.ProducerEpoch++
	}
	t.Status = PrepareAbort
	p.prepared(t, ms, res)
}

// prepared writes t's PrepareCommit/PrepareAbort and hands out its
// markers; a transaction with no partitions (a Transactions V2 abort of
// an empty transaction) completes at once.
func (p *Partition) prepared(t *Txn, ms int64, res *Result) {
	res.write(t)
	if len(t.Partitions) == 0 {
		p.complete(t, ms, res)
		return
	}
	res.Markers = append(res.Markers, markersOf(t))
}

func (p *Partition) complete(t *Txn, ms int64, res *Result) {
	t.transition(ms)
	if t.Status == PrepareCommit {
		t.Status = CompleteCommit
	} else {
		t.Status = CompleteAbort
	}
	if t.NextProducerID != NoProducerID {
		// The epoch overflowed at the end of a Transactions V2
		// transaction: the client already has the next producer id.
		t.ProducerID, t.ProducerEpoch, t.NextProducerID = t.NextProducerID, 0, NoProducerID
	}
	t.Partitions, t.Groups = nil, nil
	res.write(t)
}

// clientProducer is the producer id and epoch t's client holds: the
// ones in use, except while a Transactions V2 transaction that exhausted
// the epoch completes (its markers carry the old producer id), when the
// client already has the next producer id at epoch 0.
func (t *Txn) clientProducer() (int64, int16) {
	if t.NextProducerID != NoProducerID {
		return t.NextProducerID, 0
	}
	return t.ProducerID, t.ProducerEpoch
}

// knows says whether pid is t's producer id, or the next one its client
// already holds.
func (t *Txn) knows(pid int64) bool {
	return pid == t.ProducerID || (t.NextProducerID != NoProducerID && pid == t.NextProducerID)
}

// check is the ownership check of AddPartitionsToTxn, AddOffsetsToTxn and
// its verify form. The client's producer id and epoch are the ones it
// holds (clientProducer): with Transactions V2, the ones EndTxn returned,
// which it uses at once while the markers go out; it waits with
// CONCURRENT_TRANSACTIONS until they are done.
func (p *Partition) check(id string, pid int64, epoch int16) (*Txn, error) {
	if id == "" {
		return nil, kerr.InvalidRequest
	}
	t, ok := p.txns[id]
	if !ok || !t.knows(pid) {
		return nil, kerr.InvalidProducerIDMapping
	}
	switch cpid, cepoch := t.clientProducer(); {
	case cpid != pid || cepoch != epoch:
		return nil, kerr.ProducerFenced
	case t.Status == PrepareCommit || t.Status == PrepareAbort || t.Status == PrepareEpochFence || t.Status == Dead:
		return nil, kerr.ConcurrentTransactions
	}
	return t, nil
}

// AddRequest is AddPartitionsToTxn for one transaction: from a client
// (v0-3) or, with Transactions V2, from a partition leader enlisting the
// partitions a producer writes to (v5+, VerifyOnly false).
type AddRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Partitions      []TopicPartition
	// ClientVersion is TV2 when a partition leader sends it for a
	// Transactions V2 producer (AddPartitionsToTxn v5+), TV0 otherwise.
	ClientVersion int16
}

// AddPartitions adds partitions to the transaction, which begins (state
// Ongoing, start time now) if it was not ongoing. Err applies to every
// partition of the request.
func (p *Partition) AddPartitions(r AddRequest, now time.Time) Result {
	t, err := p.check(r.TransactionalID, r.ProducerID, r.ProducerEpoch)
	if err != nil {
		return fail(err)
	}
	return p.add(t, r.Partitions, "", r.ClientVersion, now.UnixMilli())
}

func (p *Partition) add(t *Txn, parts []TopicPartition, grp string, version int16, ms int64) Result {
	res := Result{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch}
	if t.Status == Ongoing && (grp == "" || slices.Contains(t.Groups, grp)) &&
		!slices.ContainsFunc(parts, func(tp TopicPartition) bool { return !t.has(tp) }) {
		return res // nothing new: nothing to write
	}
	t.transition(ms)
	if t.Status != Ongoing {
		t.StartMs = ms
		t.Status = Ongoing
	}
	for _, tp := range parts {
		t.addPartition(tp)
	}
	if grp != "" {
		t.addGroup(grp)
	}
	t.ClientVersion = version
	res.write(t)
	return res
}

// AddOffsets is AddOffsetsToTxn: it adds the group's __consumer_offsets
// partition to the transaction, so that the group's TxnOffsetCommit is
// committed or aborted with it.
func (p *Partition) AddOffsets(id string, pid int64, epoch int16, groupID string, now time.Time) Result {
	if groupID == "" {
		return fail(kerr.InvalidRequest)
	}
	t, err := p.check(id, pid, epoch)
	if err != nil {
		return fail(err)
	}
	tp := TopicPartition{OffsetsTopic, metadata.PartitionForKey(groupID, p.cfg.OffsetsPartitions)}
	return p.add(t, []TopicPartition{tp}, groupID, t.ClientVersion, now.UnixMilli())
}

// Verify is the verify-only form of AddPartitionsToTxn (v4+, sent by a
// partition leader before it appends a transactional batch, KIP-890 part
// 1): it changes nothing. err is the error of every partition; otherwise
// missing are the partitions not in the ongoing transaction, which get
// TRANSACTION_ABORTABLE.
func (p *Partition) Verify(id string, pid int64, epoch int16, parts []TopicPartition) (missing []TopicPartition, err error) {
	t, err := p.check(id, pid, epoch)
	if err != nil {
		return nil, err
	}
	for _, tp := range parts {
		if t.Status != Ongoing || !t.has(tp) {
			missing = append(missing, tp)
		}
	}
	return missing, nil
}

// EndRequest is EndTxn.
type EndRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Commit          bool
	// ClientVersion is TV2 for EndTxn v5+ (Transactions V2: the epoch is
	// bumped at the end of each transaction and returned), TV0 otherwise.
	ClientVersion int16
}

// EndTxn commits or aborts the ongoing transaction: it writes
// PrepareCommit or PrepareAbort and hands out the markers; MarkersDone
// completes it. The answer (with the producer id and epoch the client
// goes on with) is sent once the records are durable, before the markers.
func (p *Partition) EndTxn(r EndRequest, now time.Time) Result {
	if r.TransactionalID == "" {
		return fail(kerr.InvalidRequest)
	}
	t, ok := p.txns[r.TransactionalID]
	if !ok {
		return fail(kerr.InvalidProducerIDMapping)
	}
	ms := now.UnixMilli()
	// The request's version picks the rules (EndTxn v5+ is V2), as in
	// Kafka.
	v2 := r.ClientVersion >= TV2 && t.Status != PrepareEpochFence
	// A Transactions V2 client retrying an EndTxn whose answer it lost
	// presents the epoch before the bump, or the exhausted epoch of the
	// producer id the transaction ended with.
	retryBump := v2 && r.ProducerID == t.ProducerID && t.ProducerEpoch == r.ProducerEpoch+1
	retryOverflow := v2 && t.PrevProducerID == r.ProducerID && r.ProducerEpoch == math.MaxInt16-1 && t.ProducerEpoch == 0
	retry := retryBump || retryOverflow
	// The producer id and epoch the client holds: with V2, the ones the
	// last EndTxn returned, even while that transaction's markers go out.
	cpid, cepoch := t.clientProducer()
	holds := r.ProducerID == cpid && r.ProducerEpoch == cepoch
	var validEpoch bool
	if v2 {
		switch t.Status {
		case PrepareCommit, PrepareAbort:
			validEpoch = retryBump || holds
		case CompleteCommit, CompleteAbort:
			validEpoch = retry || holds
		default:
			validEpoch = holds
		}
	} else {
		validEpoch = r.ProducerEpoch == t.ProducerEpoch
	}
	switch {
	case !t.knows(r.ProducerID) && !retryOverflow:
		return fail(kerr.InvalidProducerIDMapping)
	case !validEpoch:
		return fail(kerr.ProducerFenced)
	}
	current := Result{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch}
	switch t.Status {
	case Ongoing:
		return p.end(t, r, false, ms)
	case CompleteCommit, CompleteAbort:
		same := r.Commit == (t.Status == CompleteCommit)
		switch {
		case same && (retry || !v2):
			return current // a retry of an EndTxn that succeeded
		case !r.Commit && !retry && r.ClientVersion >= TV2:
			return p.end(t, r, true, ms) // V2 may abort an empty transaction
		}
		return fail(kerr.InvalidTxnState)
	case PrepareCommit, PrepareAbort:
		// With V2 the client has the bumped epoch as soon as the
		// Prepare record is durable, before the markers: its EndTxn at
		// that epoch ends its next transaction (an abort of a
		// transaction nothing was enlisted in yet, typically), which
		// waits until this one completes, as in Kafka (its coordinator
		// answers CONCURRENT_TRANSACTIONS while the markers are
		// pending).
		if r.Commit == (t.Status == PrepareCommit) || (v2 && !retry) {
			return fail(kerr.ConcurrentTransactions)
		}
		return fail(kerr.InvalidTxnState)
	case Empty:
		if !r.Commit && r.ClientVersion >= TV2 {
			return p.end(t, r, true, ms)
		}
		return fail(kerr.InvalidTxnState)
	}
	return fail(kerr.ConcurrentTransactions) // Dead, PrepareEpochFence
}

// end writes the PrepareCommit/PrepareAbort of t. With Transactions V2
// the epoch is bumped (markers carry the bumped epoch); when it is
// exhausted, the next producer id is allocated now and returned with
// epoch 0.
func (p *Partition) end(t *Txn, r EndRequest, empty bool, ms int64) Result {
	next := NoProducerID
	if r.ClientVersion >= TV2 && exhausted(t.ProducerEpoch) {
		pid, err := p.allocate()
		if err != nil {
			return fail(err)
		}
		next = pid
	}
	t.transition(ms)
	t.ClientVersion = r.ClientVersion
	if r.ClientVersion >= TV2 && t.ProducerEpoch < math.MaxInt16 {
		// (At MaxInt16, which no client is ever given but one may
		// present after a fence, the next producer id replaces it.)
		t.LastProducerEpoch = t.ProducerEpoch
		t.ProducerEpoch++
	}
	t.NextProducerID = next
	if empty {
		t.StartMs = ms
	}
	if r.Commit {
		t.Status = PrepareCommit
	} else {
		t.Status = PrepareAbort
	}
	var res Result
	if next != NoProducerID {
		res.ProducerID, res.ProducerEpoch = next, 0
	} else {
		res.ProducerID, res.ProducerEpoch = t.ProducerID, t.ProducerEpoch
	}
	p.prepared(t, ms, &res)
	return res
}

// ErrStaleMarkers is returned by MarkersDone when the transaction is no
// longer the one the markers were for (another coordinator took over, or
// it was already completed): the caller drops the work.
var ErrStaleMarkers = errors.New("txn: markers for a transaction that is no longer pending")

// MarkersDone completes a transaction once every partition of its
// Markers has its marker durable: PrepareCommit → CompleteCommit,
// PrepareAbort → CompleteAbort.
func (p *Partition) MarkersDone(m Markers, now time.Time) (Result, error) {
	t, ok := p.txns[m.TransactionalID]
	if !ok || t.ProducerID != m.ProducerID || t.ProducerEpoch != m.ProducerEpoch ||
		(t.Status != PrepareCommit && t.Status != PrepareAbort) || m.Commit != (t.Status == PrepareCommit) {
		return Result{}, ErrStaleMarkers
	}
	var res Result
	p.complete(t, now.UnixMilli(), &res)
	res.ProducerID, res.ProducerEpoch = t.ProducerID, t.ProducerEpoch
	return res, nil
}
