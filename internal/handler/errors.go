package handler

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/cluster"
	blog "github.com/berthmq/berth/internal/log"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/internal/sharepart"
)

// codeTable maps package sentinel errors to Kafka error codes. It is the
// one place where internal errors meet the wire.
var codeTable = []struct {
	err  error
	code *kerr.Error
}{
	{batch.ErrCorrupt, kerr.CorruptMessage},
	{batch.ErrUnsupportedMagic, kerr.UnsupportedForMessageFormat},
	{batch.ErrInvalidRecord, kerr.InvalidRecord},
	{batch.ErrTooLarge, kerr.MessageTooLarge},
	{batch.ErrInvalidTimestamp, kerr.InvalidTimestamp},
	{batch.ErrUnsupportedCodec, kerr.UnsupportedCompressionType},
	{replica.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{replica.ErrInvalidEpoch, kerr.InvalidProducerEpoch},
	{replica.ErrCoordinatorFenced, kerr.TransactionCoordinatorFenced},
	{replica.ErrMultipleBatches, kerr.InvalidRecord},
	{replica.ErrTxnChanged, kerr.NotEnoughReplicas}, // retriable: the retry asks the coordinator again
	{replica.ErrNotLeader, kerr.NotLeaderForPartition},
	{replica.ErrNotFollower, kerr.NotLeaderForPartition},
	{replica.ErrNotReplica, kerr.NotLeaderForPartition},
	{replica.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend},
	{replica.ErrClosed, kerr.NotLeaderForPartition},
	{replica.ErrFencedEpoch, kerr.FencedLeaderEpoch},
	{replica.ErrUnknownEpoch, kerr.UnknownLeaderEpoch},
	{replica.ErrStorage, kerr.KafkaStorageError},
	{replica.ErrDiskLow, kerr.KafkaStorageError},
	{replica.ErrAckTimeout, kerr.RequestTimedOut},
	{replica.ErrInvalidOffset, kerr.OffsetOutOfRange},
	{blog.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{blog.ErrDiskFull, kerr.KafkaStorageError},
	{blog.ErrCorrupt, kerr.KafkaStorageError},
	{blog.ErrInvalidBatch, kerr.CorruptMessage},
	{blog.ErrFailed, kerr.KafkaStorageError},
	{blog.ErrClosed, kerr.NotLeaderForPartition},
	{cluster.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor},
	{cluster.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
	{cluster.ErrElectionNotNeeded, kerr.ElectionNotNeeded},
	{cluster.ErrPreferredLeaderNotAvailable, kerr.PreferredLeaderNotAvailable},
	{cluster.ErrEligibleLeadersNotAvailable, kerr.EligibleLeadersNotAvailable},
	{cluster.ErrUnknownPartition, kerr.UnknownTopicOrPartition},
	{cluster.ErrNoReassignmentInProgress, kerr.NoReassignmentInProgress},
	{metadata.ErrTopicExists, kerr.TopicAlreadyExists},
	{metadata.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
	{metadata.ErrInvalidTopic, kerr.InvalidTopicException},
	{metadata.ErrInvalidPartitions, kerr.InvalidPartitions},
	{metadata.ErrInvalidReplicas, kerr.InvalidReplicaAssignment},
	{metadata.ErrInvalidConfig, kerr.InvalidConfig},
	{metadata.ErrStaleEpoch, kerr.InvalidUpdateVersion},
	{metadata.ErrQuorumChangePending, kerr.RequestTimedOut},
	{metadata.ErrInvalidQuorumChange, kerr.InvalidRequest},
	{metadata.ErrNotLeader, kerr.NotController},
	{metadata.ErrClosed, kerr.NotController},
	{share.ErrInvalidRecordState, kerr.InvalidRecordState},
	{share.ErrInvalidAck, kerr.InvalidRequest},
	{errInvalidAckType, kerr.InvalidRequest},
	{sharepart.ErrSessionNotFound, kerr.ShareSessionNotFound},
	{sharepart.ErrInvalidSessionEpoch, kerr.InvalidShareSessionEpoch},
	{sharepart.ErrStateUnavailable, kerr.CoordinatorNotAvailable},
	{share.ErrInvalidPartitionConfig, kerr.InvalidConfig},
	{context.DeadlineExceeded, kerr.RequestTimedOut},
	{context.Canceled, kerr.RequestTimedOut},
}

// code maps an error to its Kafka error code (0 for nil).
func code(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	for _, e := range codeTable {
		if errors.Is(err, e.err) {
			return e.code.Code
		}
	}
	return kerr.UnknownServerError.Code
}

// errMsg is the message to put in responses that carry one.
func errMsg(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
