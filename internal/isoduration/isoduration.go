// Package isoduration parses ISO-8601 durations as Java's
// java.time.Duration.parse does ("PnDTnHnMn.nS"), the form of Kafka's
// by_duration offset resets (KIP-1106).
package isoduration

import (
	"errors"
	"fmt"
	"math"
	"math/big"
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
// Java's durations reach 2^63 seconds, time.Duration only about 292
// years: a valid duration beyond that saturates at the nearest bound.
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
	// The sum in nanoseconds as a big.Int: Java's parts may be as large
	// as its int64 seconds allow.
	total := new(big.Int)
	for _, f := range []struct {
		field string
		unit  int64
	}{{days, int64(24 * time.Hour)}, {hours, int64(time.Hour)}, {minutes, int64(time.Minute)}, {secs, int64(time.Second)}} {
		if f.field == "" {
			continue
		}
		n, ok := new(big.Int).SetString(strings.TrimPrefix(f.field, "+"), 10)
		if !ok {
			return 0, fmt.Errorf("%q: %w", text, ErrSyntax)
		}
		total.Add(total, n.Mul(n, big.NewInt(f.unit)))
	}
	if frac != "" {
		ns, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		// The fraction takes the seconds' sign ("PT-1.5S" is -1.5 s).
		if strings.HasPrefix(secs, "-") {
			ns = -ns
		}
		total.Add(total, big.NewInt(ns))
	}
	if m[1] == "-" {
		total.Neg(total)
	}
	switch {
	case total.Cmp(big.NewInt(math.MaxInt64)) > 0:
		return math.MaxInt64, nil
	case total.Cmp(big.NewInt(math.MinInt64)) < 0:
		return math.MinInt64, nil
	}
	return time.Duration(total.Int64()), nil
}
