package isoduration

import (
	"errors"
	"math"
	"testing"
	"time"
)

// The cases of Java's Duration.parse documentation, and what it refuses.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"PT20.345S", 20*time.Second + 345*time.Millisecond},
		{"PT15M", 15 * time.Minute},
		{"PT10H", 10 * time.Hour},
		{"P2D", 48 * time.Hour},
		{"P2DT3H4M", 51*time.Hour + 4*time.Minute},
		{"PT-6H3M", -6*time.Hour + 3*time.Minute},
		{"-PT6H3M", -6*time.Hour - 3*time.Minute},
		{"-PT-6H+3M", 6*time.Hour - 3*time.Minute},
		{"pt1h", time.Hour},
		{"PT1,5S", 1500 * time.Millisecond},
		{"PT-1.5S", -1500 * time.Millisecond},
		{"PT0.000000001S", time.Nanosecond},
		{"PT0S", 0},
		{"PT10S", 10 * time.Second},
	} {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "P", "PT", "P1DT", "10S", "PT1.S5", "PT1.0000000001S", "P1W", "PT1H ", " PT1H", "P1Y", "PT1.5M"} {
		if _, err := Parse(in); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q): %v, want ErrSyntax", in, err)
		}
	}
	// Valid in Java, beyond time.Duration: saturated.
	for in, want := range map[string]time.Duration{
		"P200000D":                math.MaxInt64,
		"PT9223372036854775807S":  math.MaxInt64,
		"-P200000D":               math.MinInt64,
		"PT-9223372036854775808S": math.MinInt64,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
