package config

import (
	"math"
	"testing"
	"time"
)

func TestCleanupPolicyDeletes(t *testing.T) {
	for _, tc := range []struct {
		policy  string
		deletes bool
	}{
		{"delete", true},
		{"compact", false},
		{"compact,delete", true},
		{"delete,compact", true},
		{"compact, delete", true},
		{" delete ", true},
		{"compact,compact", false},
		{"", false},
		{"deleted", false},
		{"DELETE", false}, // not a valid value; never enables deletion
	} {
		if got := CleanupPolicyDeletes(tc.policy); got != tc.deletes {
			t.Errorf("CleanupPolicyDeletes(%q) = %v, want %v", tc.policy, got, tc.deletes)
		}
	}
}

func TestValidCleanupPolicy(t *testing.T) {
	for _, ok := range []string{"delete", "compact", "compact,delete", "delete,compact", "compact, delete"} {
		if err := ValidateTopicConfig("cleanup.policy", ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	// Kafka 3.9 accepts an empty list (neither deleted nor compacted).
	if err := ValidateTopicConfig("cleanup.policy", ""); err != nil {
		t.Errorf("empty: %v", err)
	}
	for _, bad := range []string{",", "remove", "compact,remove", "Delete"} {
		if err := ValidateTopicConfig("cleanup.policy", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestMillisDuration(t *testing.T) {
	const maxMs = int64(math.MaxInt64 / time.Millisecond) // 9223372036854
	for _, tc := range []struct {
		ms   int64
		want time.Duration
		ok   bool
	}{
		{0, 0, true},
		{1, time.Millisecond, true},
		{604800000, 168 * time.Hour, true},
		{maxMs, time.Duration(maxMs) * time.Millisecond, true},
		{9223372036855, 0, false}, // one more overflows a Duration
		{math.MaxInt64, 0, false}, // Long.MAX_VALUE: forever
		{math.MaxInt64 / 2, 0, false},
		{-1, 0, false},
		{math.MinInt64, 0, false},
	} {
		got, ok := MillisDuration(tc.ms)
		if got != tc.want || ok != tc.ok {
			t.Errorf("MillisDuration(%d) = %v, %v; want %v, %v", tc.ms, got, ok, tc.want, tc.ok)
		}
		if ok && got < 0 {
			t.Errorf("MillisDuration(%d) = %v: negative", tc.ms, got)
		}
	}
}

// Broker millisecond properties too large for a Duration clamp, read back
// as Long.MAX_VALUE, and give topics a default that means "never".
func TestHugeBrokerDurationsMeanNever(t *testing.T) {
	const longMax = "9223372036854775807"
	for _, tc := range []struct {
		override   string
		prop       string // canonical broker property
		topicValue string // topic config the property defaults
	}{
		{"log.retention.ms=" + longMax, "log.retention.ms", "retention.ms"},
		{"log.retention.ms=9223372036855", "log.retention.ms", "retention.ms"},
		{"log.retention.hours=" + longMax, "log.retention.ms", "retention.ms"},
		{"log.retention.minutes=153722867280913", "log.retention.ms", "retention.ms"},
		{"log.roll.ms=" + longMax, "log.roll.ms", "segment.ms"},
		{"log.roll.hours=2562048", "log.roll.ms", "segment.ms"},
		{"log.flush.interval.ms=" + longMax, "log.flush.interval.ms", "flush.ms"},
	} {
		c, _, err := Load("", []string{tc.override})
		if err != nil {
			t.Errorf("%s: %v", tc.override, err)
			continue
		}
		if got := c.Properties()[tc.prop]; got != longMax {
			t.Errorf("%s: Properties()[%s] = %q, want %s", tc.override, tc.prop, got, longMax)
		}
		v := c.EffectiveTopicConfig(nil)[tc.topicValue]
		if v != longMax {
			t.Errorf("%s: topic default %s = %q, want %s", tc.override, tc.topicValue, v, longMax)
		}
		if err := ValidateTopicConfig(tc.topicValue, v); err != nil {
			t.Errorf("%s: topic default %s=%s invalid: %v", tc.override, tc.topicValue, v, err)
		}
		back, _, err := Load("", []string{tc.prop + "=" + longMax})
		if err != nil || back.Properties()[tc.prop] != longMax {
			t.Errorf("%s: does not load back: %v", tc.override, err)
		}
	}
}

func TestBrokerCleanupPolicy(t *testing.T) {
	if got := Default().EffectiveTopicConfig(nil)["cleanup.policy"]; got != "delete" {
		t.Errorf("default cleanup.policy %q, want delete", got)
	}
	c, _, err := Load("", []string{"log.cleanup.policy=compact, delete"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Properties()["log.cleanup.policy"]; got != "compact,delete" {
		t.Errorf("log.cleanup.policy reads back as %q", got)
	}
	c, _, err = Load("", []string{"log.cleanup.policy=compact"})
	if err != nil {
		t.Fatal(err)
	}
	eff := c.EffectiveTopicConfig(nil)
	if eff["cleanup.policy"] != "compact" || CleanupPolicyDeletes(eff["cleanup.policy"]) {
		t.Errorf("broker default compact: topic cleanup.policy %q", eff["cleanup.policy"])
	}
	if eff := c.EffectiveTopicConfig(map[string]string{"cleanup.policy": "delete"}); eff["cleanup.policy"] != "delete" {
		t.Errorf("topic override lost: %q", eff["cleanup.policy"])
	}
	for _, bad := range []string{"", "remove", "compact,remove"} {
		if _, _, err := Load("", []string{"log.cleanup.policy=" + bad}); err == nil {
			t.Errorf("log.cleanup.policy=%q accepted", bad)
		}
	}
}
