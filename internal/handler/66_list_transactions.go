package handler

// ListTransactions, versions 0-2: the transactions of the
// __transaction_state partitions this node leads (a client asks every
// broker), filtered by state (unknown names are returned in
// UnknownStateFilters), producer id, duration (v1+, KIP-994) and
// transactional id pattern (v2+, a Go regexp; INVALID_REQUEST if it does
// not compile). A partition still loading answers
// COORDINATOR_LOAD_IN_PROGRESS.

import (
	"context"
	"errors"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/txn"
)

func init() { register(66, 0, 2, (*Broker).listTransactions) }

func (b *Broker) listTransactions(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.ListTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	var f txn.ListFilter
	for _, name := range r.StateFilters {
		if s, ok := txn.ParseStatus(name); ok {
			f.States = append(f.States, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	if len(r.StateFilters) > 0 && len(f.States) == 0 {
		return now(resp), nil // only unknown states: nothing matches
	}
	f.ProducerIDs = r.ProducerIDFilters
	if r.Version >= 1 {
		f.MinDuration = time.Duration(r.DurationFilterMillis) * time.Millisecond
	}
	if r.Version >= 2 && r.TransactionalIDPattern != nil && *r.TransactionalIDPattern != "" {
		re, err := regexp.Compile(*r.TransactionalIDPattern)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return now(resp), nil
		}
		f.Pattern = re
	}
	if b.Txns == nil {
		return now(resp), nil
	}
	t := time.Now()
	for _, p := range b.Txns.Loaded() {
		err := b.Txns.View(p, func(tp *txn.Partition) {
			for _, l := range tp.List(f, t) {
				if !b.mayQuietly(req, opDescribe, rTxnID, l.TransactionalID) {
					continue // as Kafka: only the ids the principal may describe
				}
				s := kmsg.NewListTransactionsResponseTransactionState()
				s.TransactionalID, s.ProducerID, s.TransactionState = l.TransactionalID, l.ProducerID, l.State
				resp.TransactionStates = append(resp.TransactionStates, s)
			}
		})
		if errors.Is(err, kerr.CoordinatorLoadInProgress) {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		}
	}
	return now(resp), nil
}
