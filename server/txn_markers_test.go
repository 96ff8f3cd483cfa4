package server

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestDecideMarker(t *testing.T) {
	cases := []struct {
		name        string
		err         error
		topicExists bool
		want        markerOutcome
	}{
		{"written", nil, true, markerDone},
		{"topic deleted", kerr.UnknownTopicOrPartition, false, markerDone},
		{"unknown partition of a live topic: metadata lags", kerr.UnknownTopicOrPartition, true, markerRetry},
		{"leader moved", fmt.Errorf("x: %w", kerr.NotLeaderForPartition), true, markerRetry},
		{"not enough replicas", kerr.NotEnoughReplicasAfterAppend, true, markerRetry},
		{"connection failed", errors.New("dial tcp: refused"), true, markerRetry},
		{"producer moved on", kerr.InvalidProducerEpoch, true, markerStop},
		{"newer coordinator", fmt.Errorf("x: %w", kerr.TransactionCoordinatorFenced), true, markerStop},
	}
	for _, c := range cases {
		if got := decideMarker(c.err, c.topicExists); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
