package server

import (
	"testing"
	"time"
)

// sessionExpiry is Kafka's SaslServerAuthenticator rule: the credential's
// expiry and connections.max.reauth.ms, whichever comes first.
func TestSessionExpiry(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name       string
		reauth     time.Duration
		credential time.Time
		want       time.Time
	}{
		{"neither", 0, time.Time{}, time.Time{}},
		{"reauth only", time.Minute, time.Time{}, now.Add(time.Minute)},
		{"token only", 0, now.Add(time.Hour), now.Add(time.Hour)},
		{"token first", time.Hour, now.Add(time.Minute), now.Add(time.Minute)},
		{"reauth first", time.Minute, now.Add(time.Hour), now.Add(time.Minute)},
		{"token already expired (clock skew)", time.Minute, now.Add(-time.Second), now},
	}
	for _, tt := range tests {
		if got := sessionExpiry(now, tt.reauth, tt.credential); !got.Equal(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
