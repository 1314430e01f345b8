package replica

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/berthmq/berth/internal/batch"
	blog "github.com/berthmq/berth/internal/log"
)

// Idempotence errors; the handler maps them to Kafka codes.
var (
	ErrOutOfOrderSequence = errors.New("replica: out of order sequence number") // OUT_OF_ORDER_SEQUENCE_NUMBER
	ErrInvalidEpoch       = errors.New("replica: stale producer epoch")         // INVALID_PRODUCER_EPOCH
	ErrMultipleBatches    = errors.New("replica: an idempotent or transactional batch must be alone in its partition's record set")
	// ErrCoordinatorFenced refuses a transaction marker written by an
	// older transaction coordinator than the producer's last marker
	// (TRANSACTION_COORDINATOR_FENCED).
	ErrCoordinatorFenced = errors.New("replica: transaction marker from a fenced coordinator")
)

// batchMeta remembers one appended batch of a producer for duplicate
// detection.
type batchMeta struct {
	FirstSeq    int32 `json:"fs"`
	LastSeq     int32 `json:"ls"`
	FirstOffset int64 `json:"fo"`
	LastOffset  int64 `json:"lo"`
	Timestamp   int64 `json:"ts"`
}

// producerEntry is the state of one producer id on one partition: its epoch
// and its last five batches (Kafka keeps five, the most a client has in flight).
type producerEntry struct {
	Epoch   int16       `json:"e"`
	Batches []batchMeta `json:"b"`
	// LastSeen is the log append time (ms) of its last batch, for expiry.
	LastSeen int64 `json:"t"`
	// InTxn says the producer has an ongoing transaction on this
	// partition, whose first offset is TxnFirst: from its first
	// transactional batch to its COMMIT or ABORT marker. Snapshots written
	// before transactions lack both (no transaction).
	InTxn    bool  `json:"it,omitempty"`
	TxnFirst int64 `json:"tf,omitempty"`
	// CoordEpoch is the coordinator epoch of the last marker applied to
	// the producer (Kafka's ProducerStateEntry.coordinatorEpoch); nil
	// when unknown: no marker yet, or a snapshot written before it was
	// kept. Read it with coordinatorEpoch.
	CoordEpoch *int32 `json:"ce,omitempty"`
	// Markers counts the markers applied to the producer since the entry
	// was made (not persisted): a TxnGuard compares it (verify.go).
	Markers uint64 `json:"-"`
}

// AbortedTxn is one aborted transaction of a partition: its producer, its
// first offset and the offset of its ABORT marker (Kafka's AbortedTxn).
// The log keeps them in its per-segment transaction indexes.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// unstableTxn is a transaction that holds back the last stable offset:
// ongoing (end = maxOffset), or ended by a marker at end that is not yet
// below the high watermark.
type unstableTxn struct {
	first, end int64
}

const maxOffset = int64(1<<63 - 1)

const maxCachedBatches = 5

// producerState is the idempotence state of one partition. It is owned by
// the partition's append mutex.
type producerState struct {
	m map[int64]*producerEntry
	// legacyAborted holds the aborted transactions of a version 2
	// snapshot, for loadProducers to write into the log's transaction
	// indexes; nil otherwise.
	legacyAborted []AbortedTxn
	// ended are transactions whose marker is appended but may not be
	// below the high watermark yet: they hold the LSO back until it is.
	ended []unstableTxn
}

func newProducerState() *producerState { return &producerState{m: map[int64]*producerEntry{}} }

// unstable lists the transactions that may hold back the last stable
// offset at high watermark hw, dropping ended ones now below it.
func (ps *producerState) unstable(hw int64) []unstableTxn {
	n := 0
	for _, u := range ps.ended {
		if u.end >= hw {
			ps.ended[n] = u
			n++
		}
	}
	ps.ended = ps.ended[:n]
	var out []unstableTxn
	for _, e := range ps.m {
		if e.InTxn {
			out = append(out, unstableTxn{first: e.TxnFirst, end: maxOffset})
		}
	}
	return append(out, ps.ended...)
}

// coordinatorEpoch is the coordinator epoch of the producer's last
// marker, -1 when unknown.
func (e *producerEntry) coordinatorEpoch() int32 {
	if e.CoordEpoch == nil {
		return -1
	}
	return *e.CoordEpoch
}

// checkMarker refuses a transaction marker from an older producer epoch
// (ErrInvalidEpoch) or, as Kafka does, from an older transaction
// coordinator than the producer's last marker (ErrCoordinatorFenced): the
// coordinator sends the leader epoch of its __transaction_state partition,
// which only grows across failovers, so only a deposed coordinator's late
// marker is refused.
func (ps *producerState) checkMarker(producerID int64, epoch int16, coordinatorEpoch int32) error {
	e := ps.m[producerID]
	if e == nil {
		return nil
	}
	if epoch < e.Epoch {
		return fmt.Errorf("%w: marker for producer %d at epoch %d, current %d", ErrInvalidEpoch, producerID, epoch, e.Epoch)
	}
	if last := e.coordinatorEpoch(); coordinatorEpoch < last {
		return fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, last marker's %d", ErrCoordinatorFenced, producerID, coordinatorEpoch, last)
	}
	return nil
}

// abortEntry returns the transaction index entry of an ABORT marker of
// producerID at offset, before endTxn applies it; false if the producer
// has no transaction open (nothing to list). Its LastStableOffset is the
// first offset of the oldest other open transaction, or offset + 1.
func (ps *producerState) abortEntry(producerID, offset int64) (blog.AbortedTxn, bool) {
	e := ps.m[producerID]
	if e == nil || !e.InTxn {
		return blog.AbortedTxn{}, false
	}
	lso := offset + 1
	for id, o := range ps.m {
		if id != producerID && o.InTxn && o.TxnFirst < lso {
			lso = o.TxnFirst
		}
	}
	return blog.AbortedTxn{ProducerID: producerID, FirstOffset: e.TxnFirst, LastOffset: offset, LastStableOffset: lso}, true
}

// endTxn applies a COMMIT or ABORT marker appended at offset and written
// by the coordinator at coordinatorEpoch: the producer's transaction ends
// (an aborted one's entry, from abortEntry, goes to the log's transaction
// index) and its coordinator epoch becomes the marker's. A marker at a
// newer epoch (Transactions V2 bumps it) restarts the producer's sequence
// checks.
func (ps *producerState) endTxn(producerID int64, epoch int16, coordinatorEpoch int32, offset, now int64) {
	e := ps.m[producerID]
	if e == nil {
		e = &producerEntry{Epoch: epoch}
		ps.m[producerID] = e
	}
	if epoch > e.Epoch {
		e.Epoch = epoch
		e.Batches = e.Batches[:0]
	}
	e.Markers++
	if e.InTxn {
		ps.ended = append(ps.ended, unstableTxn{first: e.TxnFirst, end: offset})
	}
	e.InTxn, e.TxnFirst = false, 0
	e.CoordEpoch = &coordinatorEpoch
	e.LastSeen = now
}

// legacyEntries turns the aborted transactions of a version 2 snapshot
// taken at offset into transaction index entries. Their LastStableOffset
// is not known; each gets a lower bound that keeps AbortedTxns' early stop
// sound: the first offset of every later aborted transaction in the list
// and of every transaction open at the snapshot, and offset.
func (ps *producerState) legacyEntries(offset int64) []blog.AbortedTxn {
	lso := offset
	for _, e := range ps.m {
		if e.InTxn && e.TxnFirst < lso {
			lso = e.TxnFirst
		}
	}
	out := make([]blog.AbortedTxn, len(ps.legacyAborted))
	for i := len(out) - 1; i >= 0; i-- {
		a := ps.legacyAborted[i]
		out[i] = blog.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset, LastOffset: a.LastOffset, LastStableOffset: lso}
		lso = min(lso, a.FirstOffset)
	}
	return out
}

// check decides what to do with an idempotent batch: a duplicate returns
// the original batch, an error rejects it, nil/nil means append.
func (ps *producerState) check(h *batch.Header) (*batchMeta, error) {
	e := ps.m[h.ProducerID]
	if e == nil {
		// An unknown producer may start at any sequence, as in Kafka 2.5+
		// (KIP-360): its state may have expired (producer.id.expiration.ms)
		// or been removed with the records that carried it.
		return nil, nil
	}
	if h.ProducerEpoch < e.Epoch {
		return nil, fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidEpoch, h.ProducerID, h.ProducerEpoch, e.Epoch)
	}
	if h.ProducerEpoch > e.Epoch {
		if h.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: new epoch %d of producer %d starts at sequence %d, want 0", ErrOutOfOrderSequence, h.ProducerEpoch, h.ProducerID, h.BaseSequence)
		}
		return nil, nil
	}
	last := h.LastSequence()
	for i := range e.Batches {
		b := &e.Batches[i]
		if b.FirstSeq == h.BaseSequence && b.LastSeq == last {
			return b, nil
		}
	}
	if len(e.Batches) == 0 {
		return nil, nil
	}
	prev := e.Batches[len(e.Batches)-1].LastSeq
	want := prev + 1
	if prev == 1<<31-1 {
		want = 0
	}
	if h.BaseSequence != want {
		return nil, fmt.Errorf("%w: producer %d sent sequence %d, expected %d", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence, want)
	}
	return nil, nil
}

// update records an appended batch.
func (ps *producerState) update(h *batch.Header, firstOffset int64, now int64) {
	e := ps.m[h.ProducerID]
	if e == nil {
		e = &producerEntry{Epoch: h.ProducerEpoch}
		ps.m[h.ProducerID] = e
	}
	if h.ProducerEpoch > e.Epoch {
		e.Epoch = h.ProducerEpoch
		e.Batches = e.Batches[:0]
	}
	if len(e.Batches) == maxCachedBatches {
		copy(e.Batches, e.Batches[1:])
		e.Batches = e.Batches[:maxCachedBatches-1]
	}
	e.Batches = append(e.Batches, batchMeta{
		FirstSeq: h.BaseSequence, LastSeq: h.LastSequence(),
		FirstOffset: firstOffset, LastOffset: firstOffset + int64(h.LastOffsetDelta),
		Timestamp: h.MaxTimestamp,
	})
	e.LastSeen = now
	if h.Transactional() && !e.InTxn {
		e.InTxn, e.TxnFirst = true, firstOffset
	}
}

// truncate forgets batches at or above offset (after a log truncation).
func (ps *producerState) truncate(offset int64) {
	for id, e := range ps.m {
		n := 0
		for _, b := range e.Batches {
			if b.LastOffset < offset {
				e.Batches[n] = b
				n++
			}
		}
		e.Batches = e.Batches[:n]
		if e.InTxn && e.TxnFirst >= offset {
			e.InTxn, e.TxnFirst = false, 0
		}
		if n == 0 && !e.InTxn {
			delete(ps.m, id)
		}
	}
}

// expire drops producers idle since before cutoff (ms) and reports
// whether any went.
func (ps *producerState) expire(cutoff int64) bool {
	n := len(ps.m)
	for id, e := range ps.m {
		if e.LastSeen < cutoff && !e.InTxn {
			delete(ps.m, id)
		}
	}
	return len(ps.m) != n
}

// snapshotData is the snapshot data since transactions: the producers
// (version 3), and in version 2 also the aborted transactions, which now
// live in the log's transaction indexes. Version 1 data is the bare
// producer map (docs/format/log.md).
type snapshotData struct {
	V       int                      `json:"v"`
	P       map[int64]*producerEntry `json:"p"`
	Aborted [][3]int64               `json:"a,omitempty"` // version 2 only
}

func (ps *producerState) marshal() ([]byte, error) {
	return json.Marshal(snapshotData{V: 3, P: ps.m})
}

func (ps *producerState) unmarshal(b []byte) error {
	var v struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v.V == 0 { // version 1: the producer map alone
		m := map[int64]*producerEntry{}
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		ps.m, ps.legacyAborted = m, nil
		return nil
	}
	if v.V != 2 && v.V != 3 {
		return fmt.Errorf("producer snapshot data version %d", v.V)
	}
	var s snapshotData
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s.P == nil {
		s.P = map[int64]*producerEntry{}
	}
	ps.m, ps.legacyAborted = s.P, nil
	if v.V == 2 {
		for _, a := range s.Aborted {
			ps.legacyAborted = append(ps.legacyAborted, AbortedTxn{ProducerID: a[0], FirstOffset: a[1], LastOffset: a[2]})
		}
	}
	return nil
}
