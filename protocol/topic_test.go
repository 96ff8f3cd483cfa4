package protocol

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestValidTopicName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"a", true},
		{"Orders.v2_eu-west-1", true},
		{"__consumer_offsets", true},
		{"...", true},
		{strings.Repeat("x", 249), true},
		{strings.Repeat("x", 250), false},
		{"", false},
		{".", false},
		{"..", false},
		{"with space", false},
		{"slash/inside", false},
		{"colon:", false},
		{"ünïcode", false},
		{"tab\t", false},
	} {
		err := ValidTopicName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidTopicName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, kerr.InvalidTopicException) {
			t.Errorf("ValidTopicName(%q): %v does not wrap INVALID_TOPIC_EXCEPTION", tc.name, err)
		}
	}
}
