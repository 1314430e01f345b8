package replica

import (
	"errors"
	"fmt"
)

// Transaction verification (KIP-890). Before a partition leader appends a
// transactional batch of a producer that has no transaction open on the
// partition at the batch's epoch, it asks the transaction coordinator
// whether the partition is in the producer's ongoing transaction (or, for
// a Transactions V2 producer, to add it). The answer may be overtaken: a
// timeout may abort the transaction and its ABORT marker reach the
// partition before the batch does, which would leave the batch in a
// transaction nobody ends. The guard closes that window: it remembers how
// many markers the producer had when the question was asked, and the
// append is refused if that changed.

// ErrTxnChanged refuses a checked transactional batch whose producer's
// transaction was ended by a marker while the coordinator was asked.
var ErrTxnChanged = errors.New("replica: the producer's transaction ended while its batch was verified")

// TxnGuard is taken by NeedsTxnCheck and passed to AppendChecked.
type TxnGuard struct {
	producerID int64
	markers    uint64
}

// NeedsTxnCheck reports whether a transactional batch of producer pid at
// epoch needs the coordinator's word before it is appended: the producer
// has no transaction open here at that epoch. The guard goes with the
// batch to AppendChecked.
func (p *Partition) NeedsTxnCheck(pid int64, epoch int16) (TxnGuard, bool) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	g := TxnGuard{producerID: pid}
	e := p.producers.m[pid]
	if e == nil {
		return g, true
	}
	g.markers = e.Markers
	return g, !e.InTxn || e.Epoch != epoch
}

// check is called with appendMu held.
func (g *TxnGuard) check(ps *producerState, pid int64) error {
	if pid != g.producerID {
		return fmt.Errorf("%w: verified producer %d, batch of %d", ErrTxnChanged, g.producerID, pid)
	}
	var markers uint64
	if e := ps.m[pid]; e != nil {
		markers = e.Markers
	}
	if markers != g.markers {
		return fmt.Errorf("%w: producer %d", ErrTxnChanged, pid)
	}
	return nil
}
