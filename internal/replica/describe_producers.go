package replica

import "sort"

// ProducerInfo is what a partition knows of one active producer, for
// DescribeProducers (KIP-664): a copy, taken under appendMu.
type ProducerInfo struct {
	ProducerID int64
	Epoch      int16
	// LastSequence is the last sequence number of the producer's last
	// cached batch, -1 when none is cached (only markers since its epoch
	// began, or its batches were truncated away).
	LastSequence int32
	// LastTimestamp is when the partition last saw a batch or marker of
	// the producer (ms): the leader's append time, or the batch's max
	// timestamp when the state was rebuilt from the log or copied by a
	// follower.
	LastTimestamp int64
	// TxnStartOffset is the first offset of the producer's ongoing
	// transaction on this partition, -1 when none is open.
	TxnStartOffset int64
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// wrote the producer's last marker on this partition, -1 when unknown
	// (no marker yet, or state from a snapshot that did not keep it).
	CoordinatorEpoch int32
}

// Producers lists the partition's active producers (those whose state has
// not expired), by producer id.
func (p *Partition) Producers() []ProducerInfo {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.producers == nil {
		return nil
	}
	out := make([]ProducerInfo, 0, len(p.producers.m))
	for id, e := range p.producers.m {
		pi := ProducerInfo{ProducerID: id, Epoch: e.Epoch, LastSequence: -1, LastTimestamp: e.LastSeen, TxnStartOffset: -1,
			CoordinatorEpoch: e.coordinatorEpoch()}
		if n := len(e.Batches); n > 0 {
			pi.LastSequence = e.Batches[n-1].LastSeq
		}
		if e.InTxn {
			pi.TxnStartOffset = e.TxnFirst
		}
		out = append(out, pi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}
