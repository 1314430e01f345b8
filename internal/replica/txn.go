package replica

import (
	"errors"
	"fmt"

	"github.com/berthmq/berth/internal/batch"
	blog "github.com/berthmq/berth/internal/log"
)

// The partition side of transactions: transactional batches open a
// producer's transaction (producers.go), a COMMIT or ABORT marker from the
// transaction coordinator (WriteTxnMarkers) ends it, and readers see
//
//   - the last stable offset (LSO): the first offset of the oldest
//     transaction not yet decided below the high watermark (ongoing, or
//     ended by a marker the high watermark has not passed), at most the
//     high watermark. read_committed fetches stop there;
//   - the aborted transactions, which read_committed consumers use to drop
//     aborted records.
//
// The LSO comes from the producer state, owned by appendMu; txnView is an
// immutable copy published for readers, so a fetch takes no lock. The
// aborted transactions live in the log's per-segment transaction indexes
// (blog.AbortedTxn): an ABORT marker's entry is written with the marker
// (AppendTxn, or AppendAbortedTxns for a follower's replicated markers and
// for the replay in loadProducers).

// txnView is what readers see of a partition's transactions.
type txnView struct {
	unstable []unstableTxn
}

// publishTxns refreshes the readers' view. Called with appendMu held (or
// before the partition is shared).
func (p *Partition) publishTxns() {
	u := p.producers.unstable(p.hw.Load())
	if len(u) == 0 {
		if p.txns.Load() != nil {
			p.txns.Store(&txnView{})
		}
		return
	}
	p.txns.Store(&txnView{unstable: u})
}

// lastStable is the LSO at high watermark hw.
func (p *Partition) lastStable(hw int64) int64 {
	v := p.txns.Load()
	if v == nil {
		return hw
	}
	lso := hw
	for _, u := range v.unstable {
		if u.end >= hw && u.first < lso {
			lso = u.first
		}
	}
	if start := p.log.LogStartOffset(); lso < start {
		// Retention or DeleteRecords removed the start of an open
		// transaction: as in Kafka, the LSO is never below the log start.
		lso = min(start, hw)
	}
	return lso
}

// LastStableOffset is the offset below which every transaction is decided
// and durable: what read_committed consumers may read.
func (p *Partition) LastStableOffset() int64 { return p.lastStable(p.hw.Load()) }

// abortedIn returns the aborted transactions overlapping [from, upto):
// marker at or after from, first offset before upto.
func (p *Partition) abortedIn(from, upto int64) ([]AbortedTxn, error) {
	ts, err := p.log.AbortedTxns(from, upto)
	if err != nil {
		return nil, err
	}
	var out []AbortedTxn
	for _, t := range ts {
		out = append(out, AbortedTxn{ProducerID: t.ProducerID, FirstOffset: t.FirstOffset, LastOffset: t.LastOffset})
	}
	return out, nil
}

// AbortedTransactions returns the aborted transactions whose marker is at
// or after from (tests and tools).
func (p *Partition) AbortedTransactions(from int64) []AbortedTxn {
	ts, err := p.abortedIn(max(from, p.log.LogStartOffset()), maxOffset)
	if err != nil {
		p.logg.Warn("reading aborted transactions", "topic", p.Topic, "partition", p.Index, "err", err)
	}
	return ts
}

// AppendMarker appends a transaction marker (typ batch.ControlCommit or
// batch.ControlAbort) for a producer, as WriteTxnMarkers asks: through the
// same path as a produce, so it is replicated and acknowledged like one
// (wait with WaitDurable). A marker from an older producer epoch is refused
// with ErrInvalidEpoch, one from an older coordinator than the producer's
// last marker with ErrCoordinatorFenced.
func (p *Partition) AppendMarker(producerID int64, epoch int16, typ int16, coordinatorEpoch int32) (AppendResult, error) {
	res := AppendResult{LogAppendTime: -1}
	if typ != batch.ControlCommit && typ != batch.ControlAbort {
		return res, fmt.Errorf("%w: control type %d", batch.ErrInvalidRecord, typ)
	}
	if p.closed.Load() {
		return res, ErrClosed
	}
	if errp := p.failed.Load(); errp != nil {
		return res, fmt.Errorf("%w: %v", ErrStorage, *errp)
	}
	if p.mgr.diskLow.Load() {
		return res, ErrDiskLow
	}
	now := p.mgr.now().UnixMilli()
	data := batch.BuildControl(producerID, epoch, typ, coordinatorEpoch, now)
	res.Records = 1

	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if !p.leading.Load() {
		return res, ErrNotLeader
	}
	if err := p.producers.checkMarker(producerID, epoch, coordinatorEpoch); err != nil {
		return res, err
	}
	res.Gen = p.gen.Load()
	// The transaction index entry goes to the log with the marker itself.
	var aborted []blog.AbortedTxn
	if typ == batch.ControlAbort {
		at := p.nextOffset // staged offsets run ahead of the log
		if !p.mgr.cfg.Fsync {
			at = p.log.LogEndOffset()
		}
		if t, ok := p.producers.abortEntry(producerID, at); ok {
			aborted = append(aborted, t)
		}
	}
	var base int64
	if p.mgr.cfg.Fsync {
		base = p.nextOffset
		p.nextOffset++
		p.stage(data)
		p.stagedAborted = append(p.stagedAborted, aborted...)
	} else {
		ar, err := p.log.AppendTxn(data, p.leaderEpoch.Load(), aborted)
		if err != nil {
			if !errors.Is(err, blog.ErrDiskFull) {
				p.logg.Error("marker append failed", "topic", p.Topic, "partition", p.Index, "err", err)
			}
			return res, fmt.Errorf("%w: %v", ErrStorage, err)
		}
		base = ar.FirstOffset
		p.nextOffset = ar.LogEndOffset
	}
	p.producers.endTxn(producerID, epoch, coordinatorEpoch, base, now)
	p.prodDirty = true
	p.publishTxns()
	res.BaseOffset = base
	res.Durable = base + 1
	res.LogStartOffset = p.log.LogStartOffset()
	p.mgr.markDirty(p)
	return res, nil
}
