package handler

// InitProducerId, versions 0-5, for idempotent producers: each call hands
// out a fresh producer id with epoch 0, from blocks allocated through the
// metadata log so ids are never reused, even across restarts. Not served
// yet: a transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED until
// transactions land).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(22, 0, 5, (*Broker).initProducerID) }

// producerIDBlock is how many ids one metadata record reserves.
const producerIDBlock = 1000

func (b *Broker) initProducerID(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.InitProducerIDRequest)
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return now(resp), nil
	}
	id, err := b.nextProducerID(ctx)
	if err != nil {
		b.log.Warn("allocating producer id", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return now(resp), nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return now(resp), nil
}

func (b *Broker) nextProducerID(ctx context.Context) (int64, error) {
	b.pidMu.Lock()
	defer b.pidMu.Unlock()
	if b.pidNext >= b.pidEnd {
		first, err := b.Controller.AllocateProducerIDs(ctx, producerIDBlock)
		if err != nil {
			return 0, fmt.Errorf("producer id block: %w", err)
		}
		b.pidNext, b.pidEnd = first, first+producerIDBlock
	}
	id := b.pidNext
	b.pidNext++
	return id, nil
}
