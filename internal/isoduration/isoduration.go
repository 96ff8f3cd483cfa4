// Package isoduration parses ISO-8601 durations as Java's
// java.time.Duration.parse does ("PnDTnHnMn.nS"), the form of Kafka's
// by_duration offset resets (KIP-1106).
package isoduration

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// durationPattern is Duration.parse's grammar: an optional sign, P, days,
// then after T hours, minutes and seconds with up to nine fraction digits;
// every part may carry its own sign. Letters are case-insensitive.
var durationPattern = regexp.MustCompile(`(?i)^([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?$`)

// ErrSyntax is returned for text that is not an ISO-8601 duration.
var ErrSyntax = errors.New("not an ISO-8601 duration (PnDTnHnMn.nS)")

// Parse returns the duration text denotes. Days are 24 hours, as in Java.
// A duration beyond time.Duration's range (about 292 years) is an error.
func Parse(text string) (time.Duration, error) {
	m := durationPattern.FindStringSubmatch(text)
	if m == nil {
		return 0, fmt.Errorf("%q: %w", text, ErrSyntax)
	}
	days, tPart, hours, minutes, secs, frac := m[2], m[3], m[4], m[5], m[6], m[7]
	// "P" and "PT" alone are not durations: Java wants a part, and a T
	// followed by at least one time part.
	if days == "" && hours == "" && minutes == "" && secs == "" || tPart != "" && hours == "" && minutes == "" && secs == "" {
		return 0, fmt.Errorf("%q: %w", text, ErrSyntax)
	}
	var total time.Duration
	add := func(field string, unit time.Duration) error {
		if field == "" {
			return nil
		}
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil || n > math.MaxInt64/int64(unit) || n < math.MinInt64/int64(unit) {
			return fmt.Errorf("%q: out of range", text)
		}
		part := time.Duration(n) * unit
		if (part > 0 && total > math.MaxInt64-part) || (part < 0 && total < math.MinInt64-part) {
			return fmt.Errorf("%q: out of range", text)
		}
		total += part
		return nil
	}
	for _, f := range []struct {
		field string
		unit  time.Duration
	}{{days, 24 * time.Hour}, {hours, time.Hour}, {minutes, time.Minute}, {secs, time.Second}} {
		if err := add(f.field, f.unit); err != nil {
			return 0, err
		}
	}
	if frac != "" {
		ns, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		// The fraction takes the seconds' sign ("PT-1.5S" is -1.5 s).
		if strings.HasPrefix(secs, "-") {
			ns = -ns
		}
		if err := add(strconv.FormatInt(ns, 10), time.Nanosecond); err != nil {
			return 0, err
		}
	}
	if m[1] == "-" {
		if total == math.MinInt64 {
			return 0, fmt.Errorf("%q: out of range", text)
		}
		total = -total
	}
	return total, nil
}
