package txn

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fencedSince is the first version of each coordinator API that knows
// PRODUCER_FENCED (KIP-588).
var fencedSince = map[int16]int16{
	kmsg.InitProducerID.Int16():     4,
	kmsg.AddPartitionsToTxn.Int16(): 2,
	kmsg.AddOffsetsToTxn.Int16():    2,
	kmsg.EndTxn.Int16():             2,
}

// FencedFor returns the error to put in a response of API key at version:
// PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for versions older than
// KIP-588; other errors are returned as they are.
func FencedFor(err error, key, version int16) error {
	if since, ok := fencedSince[key]; ok && version < since && errors.Is(err, kerr.ProducerFenced) {
		return kerr.InvalidProducerEpoch
	}
	return err
}
