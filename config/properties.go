package config

import (
	"fmt"
	"strconv"
	"strings"
)

// property is one key=value pair read from a .properties file.
type property struct {
	key, value string
	line       int // 1-based line where the logical line starts
}

// parseProperties reads the text of a Java .properties file with the rules
// of java.util.Properties.load, so files written for Kafka mean the same
// here:
//
//   - a line whose first non-blank character is '#' or '!' is a comment;
//   - the key ends at the first unescaped '=', ':' or blank; blanks around
//     the separator are skipped, so "k=v", "k: v" and "k v" are all k -> v;
//   - a line ending in an odd number of backslashes continues on the next
//     line, whose leading blanks are dropped;
//   - escapes: \t \n \r \f, \uXXXX, and \c for any other c means c.
//
// One difference: trailing unescaped blanks of a value are dropped (Java
// keeps them), because "9092 " meaning a different port than "9092" is a
// trap nobody sets on purpose.
func parseProperties(text string) ([]property, error) {
	var out []property
	lines := splitLines(text)
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := trimLeftBlank(lines[i])
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		logical := line
		// A continued line's successor is never a comment, even if it
		// starts with '#': Java reads it as more value.
		for endsInOddBackslashes(logical) && i+1 < len(lines) {
			i++
			logical = logical[:len(logical)-1] + trimLeftBlank(lines[i])
		}
		if endsInOddBackslashes(logical) {
			// A continuation at the end of the file: Java drops the
			// backslash.
			logical = logical[:len(logical)-1]
		}
		key, value, err := splitKeyValue(logical)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
		out = append(out, property{key: key, value: value, line: start})
	}
	return out, nil
}

// splitLines splits on \n, \r\n and \r, as Java's LineReader does.
func splitLines(text string) []string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	return strings.Split(text, "\n")
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

func trimLeftBlank(s string) string {
	i := 0
	for i < len(s) && isBlank(s[i]) {
		i++
	}
	return s[i:]
}

func endsInOddBackslashes(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitKeyValue splits one logical line into its unescaped key and value.
func splitKeyValue(line string) (string, string, error) {
	keyEnd := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++ // the escaped character belongs to the key
			continue
		}
		if c == '=' || c == ':' || isBlank(c) {
			keyEnd = i
			break
		}
	}
	rest := trimLeftBlank(line[keyEnd:])
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = trimLeftBlank(rest[1:])
	}
	key, err := unescape(line[:keyEnd], false)
	if err != nil {
		return "", "", err
	}
	value, err := unescape(rest, true)
	if err != nil {
		return "", "", err
	}
	return key, value, nil
}

// unescape resolves backslash escapes. With trimRight it also drops
// trailing blanks that were not escaped.
func unescape(s string, trimRight bool) (string, error) {
	if !strings.Contains(s, `\`) {
		if trimRight {
			s = strings.TrimRight(s, " \t\f")
		}
		return s, nil
	}
	var b strings.Builder
	keep := 0 // length of b up to the last escaped or non-blank char
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			if !isBlank(c) {
				keep = b.Len()
			}
			continue
		}
		i++
		if i == len(s) {
			break // a lone trailing backslash: Java drops it
		}
		switch c = s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\uxxxx escape in %q", s)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\uxxxx escape in %q", s)
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(c)
		}
		keep = b.Len()
	}
	out := b.String()
	if trimRight {
		out = out[:keep]
	}
	return out, nil
}
