package txn

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A leader's refusal of a marker that a newer producer or coordinator
// made stale stops the coordinator's marker sender (as Kafka's
// TransactionMarkerRequestCompletionHandler does); anything else is
// retried until the marker is durable.
func TestMarkerFencedStopsOnlyOnStaleEpochs(t *testing.T) {
	for _, e := range []*kerr.Error{kerr.InvalidProducerEpoch, kerr.TransactionCoordinatorFenced} {
		if !markerFenced(e.Code) {
			t.Errorf("%s: retried, want the sender to stop", e.Message)
		}
	}
	for _, e := range []*kerr.Error{kerr.NotLeaderForPartition, kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas,
		kerr.RequestTimedOut, kerr.KafkaStorageError, kerr.CorruptMessage} {
		if markerFenced(e.Code) {
			t.Errorf("%s: the sender stops, want a retry", e.Message)
		}
	}
}
