package metadata

import (
	"context"
	"fmt"
	"sync"
)

// producerIDBlock is how many ids one metadata record reserves.
const producerIDBlock = 1000

// ProducerIDs hands out producer ids from blocks reserved through the
// metadata log (Controller.AllocateProducerIDs), so an id is never handed
// out twice, even across restarts. A node has one: InitProducerId of
// idempotent producers and the transaction coordinator take ids from it.
type ProducerIDs struct {
	ctrl *Controller

	mu   sync.Mutex // guards next, end
	next int64
	end  int64
}

// NewProducerIDs returns the producer id allocator of a node over ctrl.
func NewProducerIDs(ctrl *Controller) *ProducerIDs { return &ProducerIDs{ctrl: ctrl} }

// Next hands out a producer id, reserving a new block when the current
// one is spent.
func (a *ProducerIDs) Next(ctx context.Context) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next >= a.end {
		first, err := a.ctrl.AllocateProducerIDs(ctx, producerIDBlock)
		if err != nil {
			return 0, fmt.Errorf("producer id block: %w", err)
		}
		a.next, a.end = first, first+producerIDBlock
	}
	id := a.next
	a.next++
	return id, nil
}
