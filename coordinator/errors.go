package coordinator

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error codes answered by the coordinator.
var (
	errNone                      = int16(0)
	errUnknownServer             = kerr.UnknownServerError.Code
	errCoordinatorNotAvailable   = kerr.CoordinatorNotAvailable.Code
	errCoordinatorLoadInProgress = kerr.CoordinatorLoadInProgress.Code
	errNotCoordinator            = kerr.NotCoordinator.Code
	errInvalidGroupID            = kerr.InvalidGroupID.Code
	errInvalidSessionTimeout     = kerr.InvalidSessionTimeout.Code
	errInconsistentGroupProtocol = kerr.InconsistentGroupProtocol.Code
	errUnknownMemberID           = kerr.UnknownMemberID.Code
	errIllegalGeneration         = kerr.IllegalGeneration.Code
	errRebalanceInProgress       = kerr.RebalanceInProgress.Code
	errMemberIDRequired          = kerr.MemberIDRequired.Code
	errFencedInstanceID          = kerr.FencedInstanceID.Code
	errGroupIDNotFound           = kerr.GroupIDNotFound.Code
	errNonEmptyGroup             = kerr.NonEmptyGroup.Code
	errOffsetMetadataTooLarge    = kerr.OffsetMetadataTooLarge.Code
	errInvalidCommitOffsetSize   = kerr.InvalidCommitOffsetSize.Code
	errGroupSubscribedToTopic    = kerr.GroupSubscribedToTopic.Code
	errUnstableOffsetCommit      = kerr.UnstableOffsetCommit.Code
)

// errTooLarge marks a write whose batch exceeds Config.MaxRecordBytes; it
// is classified like the log's MESSAGE_TOO_LARGE.
var errTooLarge = kerr.MessageTooLarge

// appendErrorCode maps a failed OffsetsLog.Append (or a failure to start
// it) to the code Kafka's GroupMetadataManager answers. forOffsets selects
// the storeOffsets mapping (INVALID_COMMIT_OFFSET_SIZE for oversized
// batches) over the storeGroup one (UNKNOWN_SERVER_ERROR).
func appendErrorCode(err error, forOffsets bool) int16 {
	switch {
	case err == nil:
		return errNone
	case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.KafkaStorageError),
		errors.Is(err, kerr.NotCoordinator):
		return errNotCoordinator
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge),
		errors.Is(err, kerr.InvalidFetchSize):
		if forOffsets {
			return errInvalidCommitOffsetSize
		}
		return errUnknownServer
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.NotEnoughReplicas),
		errors.Is(err, kerr.NotEnoughReplicasAfterAppend), errors.Is(err, kerr.RequestTimedOut),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return errCoordinatorNotAvailable
	default:
		return errCoordinatorNotAvailable
	}
}

// txnAppendErrorCode maps a failed append of a TxnOffsetCommit: the
// producer's and the transaction's errors from the partition pass through
// (Kafka's maybeConvertOffsetCommitError returns them unchanged),
// NETWORK_EXCEPTION (a failed verification) becomes
// COORDINATOR_LOAD_IN_PROGRESS so older clients retry, and the rest maps as
// a plain commit's.
func txnAppendErrorCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.InvalidProducerEpoch, kerr.ProducerFenced, kerr.InvalidTxnState,
			kerr.InvalidProducerIDMapping, kerr.TransactionAbortable, kerr.UnknownProducerID,
			kerr.ConcurrentTransactions, kerr.TransactionCoordinatorFenced:
			return ke.Code
		case kerr.NetworkException:
			return errCoordinatorLoadInProgress
		}
	}
	return appendErrorCode(err, true)
}
