package server

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// PRODUCER_FENCED reaches only the versions that know it (KIP-588).
func TestTxnErrorCode(t *testing.T) {
	fenced := fmt.Errorf("wrapped: %w", kerr.ProducerFenced)
	for _, tc := range []struct {
		err                  error
		version, fencedSince int16
		want                 int16
	}{
		{nil, 0, 4, 0},
		{fenced, 3, 4, kerr.InvalidProducerEpoch.Code},
		{fenced, 4, 4, kerr.ProducerFenced.Code},
		{fenced, 1, 2, kerr.InvalidProducerEpoch.Code},
		{fenced, 2, 2, kerr.ProducerFenced.Code},
		{kerr.ConcurrentTransactions, 0, 2, kerr.ConcurrentTransactions.Code},
		{fmt.Errorf("x: %w", kerr.NotCoordinator), 0, 2, kerr.NotCoordinator.Code},
	} {
		if got := txnErrorCode(tc.err, tc.version, tc.fencedSince); got != tc.want {
			t.Errorf("txnErrorCode(%v, v%d, since %d) = %d, want %d", tc.err, tc.version, tc.fencedSince, got, tc.want)
		}
	}
}
