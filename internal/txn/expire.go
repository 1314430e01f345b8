package txn

import "time"

// AbortTimedOut aborts every ongoing transaction older than its timeout
// (transaction.timeout.ms from its start): its epoch is bumped, which
// fences its producer, and PrepareAbort is written with the markers to
// send. Run it every AbortInterval.
func (p *Partition) AbortTimedOut(now time.Time) Result {
	ms := now.UnixMilli()
	var res Result
	for _, id := range p.ids() {
		t := p.txns[id]
		if (t.Status == Ongoing || t.Status == PrepareEpochFence) && t.StartMs >= 0 && t.StartMs+int64(t.TimeoutMs) < ms {
			p.fenceAndAbort(t, ms, &res)
		}
	}
	return res
}

// ExpireIDs deletes every transactional id whose last transaction ended
// (or whose producer was initialised) more than IDExpiration ago: a
// tombstone per id. Run it every ExpireInterval.
func (p *Partition) ExpireIDs(now time.Time) Result {
	limit := now.Add(-p.cfg.IDExpiration).UnixMilli()
	var res Result
	for _, id := range p.ids() {
		t := p.txns[id]
		switch t.Status {
		case Empty, CompleteCommit, CompleteAbort:
			if t.LastUpdateMs <= limit {
				t.Status = Dead
				res.write(t)
				delete(p.txns, id)
			}
		}
	}
	return res
}

// NextTimeout is when the oldest ongoing transaction times out (zero
// time: none is ongoing).
func (p *Partition) NextTimeout() time.Time {
	var next int64 = -1
	for _, t := range p.txns {
		if t.Status == Ongoing && t.StartMs >= 0 {
			if at := t.StartMs + int64(t.TimeoutMs); next < 0 || at < next {
				next = at
			}
		}
	}
	if next < 0 {
		return time.Time{}
	}
	return time.UnixMilli(next)
}
