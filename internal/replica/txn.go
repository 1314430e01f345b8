package replica

import (
	"errors"
	"fmt"
	"sort"

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
// Both come from the producer state, owned by appendMu; txnView is an
// immutable copy published for readers, so a fetch takes no lock.

// txnView is what readers see of a partition's transactions.
type txnView struct {
	unstable []unstableTxn
	// aborted aliases producerState.aborted, which only grows at the end
	// or loses its head: the elements this slice covers never change.
	aborted []AbortedTxn
}

// publishTxns refreshes the readers' view. Called with appendMu held (or
// before the partition is shared).
func (p *Partition) publishTxns() {
	ps := p.producers
	u := ps.unstable(p.hw.Load())
	if len(u) == 0 && len(ps.aborted) == 0 {
		if p.txns.Load() != nil {
			p.txns.Store(&txnView{})
		}
		return
	}
	p.txns.Store(&txnView{unstable: u, aborted: ps.aborted[:len(ps.aborted):len(ps.aborted)]})
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
func (p *Partition) abortedIn(from, upto int64) []AbortedTxn {
	v := p.txns.Load()
	if v == nil {
		return nil
	}
	a := v.aborted
	i := sort.Search(len(a), func(i int) bool { return a[i].LastOffset >= from })
	var out []AbortedTxn
	for _, t := range a[i:] {
		if t.FirstOffset < upto {
			out = append(out, t)
		}
	}
	return out
}

// AbortedTransactions returns the aborted transactions whose marker is at
// or after from (tests and tools).
func (p *Partition) AbortedTransactions(from int64) []AbortedTxn {
	return p.abortedIn(from, maxOffset)
}

// AppendMarker appends a transaction marker (typ batch.ControlCommit or
// batch.ControlAbort) for a producer, as WriteTxnMarkers asks: through the
// same path as a produce, so it is replicated and acknowledged like one
// (wait with WaitDurable). A marker from an older producer epoch is refused
// with ErrInvalidEpoch.
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
	if err := p.producers.checkMarker(producerID, epoch); err != nil {
		return res, err
	}
	res.Gen = p.gen.Load()
	var base int64
	if p.mgr.cfg.Fsync {
		base = p.nextOffset
		p.nextOffset++
		p.staged = append(p.staged, data)
	} else {
		ar, err := p.log.Append(data, p.leaderEpoch.Load())
		if err != nil {
			if !errors.Is(err, blog.ErrDiskFull) {
				p.logg.Error("marker append failed", "topic", p.Topic, "partition", p.Index, "err", err)
			}
			return res, fmt.Errorf("%w: %v", ErrStorage, err)
		}
		base = ar.FirstOffset
		p.nextOffset = ar.LogEndOffset
	}
	p.producers.endTxn(producerID, epoch, typ == batch.ControlCommit, base, now)
	p.prodDirty = true
	p.publishTxns()
	res.BaseOffset = base
	res.Durable = base + 1
	res.LogStartOffset = p.log.LogStartOffset()
	p.mgr.markDirty(p)
	return res, nil
}
