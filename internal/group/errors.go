package group

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrNotCoordinator is what a Store returns when it no longer leads the
// partition written to; clients are told NOT_COORDINATOR and look the
// coordinator up again. Any other non-kerr error becomes
// COORDINATOR_NOT_AVAILABLE.
var ErrNotCoordinator = errors.New("group: not the leader of the __consumer_offsets partition")

// storeErrorCode maps a failed Store write to the code a client sees, as
// Kafka's GroupMetadataManager does (commit selects the OffsetCommit
// variant, where oversized writes are INVALID_COMMIT_OFFSET_SIZE).
func storeErrorCode(err error, commit bool) int16 {
	if errors.Is(err, ErrNotCoordinator) {
		return kerr.NotCoordinator.Code
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.CoordinatorNotAvailable.Code
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
		if commit {
			return kerr.InvalidCommitOffsetSize.Code
		}
		return kerr.UnknownServerError.Code
	}
	return ke.Code
}
