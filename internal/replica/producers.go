package replica

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/berthmq/berth/internal/batch"
)

// Idempotence errors; the handler maps them to Kafka codes.
var (
	ErrOutOfOrderSequence = errors.New("replica: out of order sequence number") // OUT_OF_ORDER_SEQUENCE_NUMBER
	ErrInvalidEpoch       = errors.New("replica: stale producer epoch")         // INVALID_PRODUCER_EPOCH
	ErrMultipleBatches    = errors.New("replica: an idempotent produce must carry one batch per partition")
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
}

const maxCachedBatches = 5

// producerState is the idempotence state of one partition. It is owned by
// the partition's append mutex.
type producerState struct {
	m map[int64]*producerEntry
}

func newProducerState() *producerState { return &producerState{m: map[int64]*producerEntry{}} }

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
		if n == 0 {
			delete(ps.m, id)
		}
	}
}

// expire drops producers idle since before cutoff (ms) and reports
// whether any went.
func (ps *producerState) expire(cutoff int64) bool {
	n := len(ps.m)
	for id, e := range ps.m {
		if e.LastSeen < cutoff {
			delete(ps.m, id)
		}
	}
	return len(ps.m) != n
}

func (ps *producerState) marshal() ([]byte, error) { return json.Marshal(ps.m) }

func (ps *producerState) unmarshal(b []byte) error {
	m := map[int64]*producerEntry{}
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	ps.m = m
	return nil
}
