package txn

import (
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Description is one transaction as DescribeTransactions returns it.
type Description struct {
	TransactionalID string
	Err             error // TRANSACTIONAL_ID_NOT_FOUND
	State           string
	TimeoutMs       int32
	StartMs         int64 // -1 when no transaction is open
	ProducerID      int64
	ProducerEpoch   int16
	Partitions      []TopicPartition
	Groups          []string // Berth: groups whose offsets are in the transaction
}

// Describe is DescribeTransactions for one transactional id.
func (p *Partition) Describe(id string) Description {
	t, ok := p.txns[id]
	if !ok {
		return Description{TransactionalID: id, Err: kerr.TransactionalIDNotFound, ProducerID: NoProducerID, ProducerEpoch: NoEpoch, StartMs: -1}
	}
	return Description{
		TransactionalID: id, State: t.Status.String(), TimeoutMs: t.TimeoutMs, StartMs: t.StartMs,
		ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch,
		Partitions: slices.Clone(t.Partitions), Groups: slices.Clone(t.Groups),
	}
}

// ListFilter is ListTransactions' filters; a zero filter matches all.
type ListFilter struct {
	States      []Status // empty: any
	ProducerIDs []int64  // empty: any
	// MinDuration (KIP-994, v1+): only transactions running for longer
	// than it (from their start); negative or zero: any.
	MinDuration time.Duration
	// Pattern (v2+): only ids it matches; nil: any.
	Pattern *regexp.Regexp
}

// Listing is one entry of ListTransactions.
type Listing struct {
	TransactionalID string
	ProducerID      int64
	State           string
}

// List is ListTransactions on this partition, sorted by id.
func (p *Partition) List(f ListFilter, now time.Time) []Listing {
	ms := now.UnixMilli()
	var out []Listing
	for _, id := range p.ids() {
		t := p.txns[id]
		switch {
		case len(f.States) > 0 && !slices.Contains(f.States, t.Status),
			len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, t.ProducerID),
			f.MinDuration > 0 && (t.StartMs < 0 || ms-t.StartMs <= f.MinDuration.Milliseconds()),
			f.Pattern != nil && !f.Pattern.MatchString(id):
			continue
		}
		out = append(out, Listing{TransactionalID: id, ProducerID: t.ProducerID, State: t.Status.String()})
	}
	return out
}

// OpenStats are the open (Ongoing or Prepare*) transactions and the
// start of the oldest, for the coordinator's metrics.
func (p *Partition) OpenStats() (open int, oldestStart time.Time) {
	oldest := int64(-1)
	for _, t := range p.txns {
		switch t.Status {
		case Ongoing, PrepareCommit, PrepareAbort, PrepareEpochFence:
			open++
			if t.StartMs >= 0 && (oldest < 0 || t.StartMs < oldest) {
				oldest = t.StartMs
			}
		}
	}
	if oldest >= 0 {
		oldestStart = time.UnixMilli(oldest)
	}
	return open, oldestStart
}
