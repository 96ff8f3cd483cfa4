package tlsconf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// Anonymous is the principal name of a client that presented no verified
// certificate.
const Anonymous = "ANONYMOUS"

// The rule grammar of Kafka's SslPrincipalMapper, spelled for RE2 with
// Java's meaning of . (no line terminator) and \s (which includes \x0B).
// Go's regexp prefers among alternatives as a backtracking engine does, so
// these split and parse exactly as Java's do.
const (
	javaDot     = `[^\n\r\x{85}\x{2028}\x{2029}]`
	javaSpace   = `[ \t\n\x0B\f\r]`
	rulePattern = `(DEFAULT)|RULE:((\\` + javaDot + `|[^\\/])*)/((\\` + javaDot + `|[^\\/])*)/([LU]?)` + javaDot + `*?|(` + javaDot + `*?)`
)

var (
	ruleSplitter = regexp.MustCompile(javaSpace + `*(` + rulePattern + `)` + javaSpace + `*(,` + javaSpace + `*|$)`)
	ruleParser   = regexp.MustCompile(`^(?:` + rulePattern + `)`)
)

// PrincipalRules map a client certificate's subject to a principal name,
// as Kafka's ssl.principal.mapping.rules do. The zero value has no rule, so
// maps nothing: use ParsePrincipalRules("DEFAULT") for Kafka's default.
type PrincipalRules struct {
	rules []principalRule
}

// ParsePrincipalRules parses ssl.principal.mapping.rules: a comma-separated
// list of DEFAULT, which yields the distinguished name unchanged, and
// RULE:pattern/replacement/ optionally followed by L or U to lower- or
// upper-case the result. A comma or slash is escaped with a backslash;
// whitespace around rules and empty rules are ignored. Splitting and
// parsing are those of Kafka's SslPrincipalMapper.
//
// Patterns are Go (RE2) regular expressions, which is Java's syntax less
// backreferences, lookaround, possessive quantifiers and class
// intersection; a pattern using those is refused. A replacement is Java's:
// $n and ${name} for groups, \ escaping the next character, and, as Kafka
// does, $n naming a group the pattern lacks is kept as literal text. Unlike
// Kafka, which finds out when a client connects, a replacement Java would
// reject (a lone $, a missing group name) is refused here.
func ParsePrincipalRules(v string) (PrincipalRules, error) {
	var r PrincipalRules
	for _, m := range ruleSplitter.FindAllStringSubmatch(strings.TrimFunc(v, isJavaTrimmed), -1) {
		text := m[1]
		loc := ruleParser.FindStringSubmatchIndex(text)
		if loc == nil {
			return PrincipalRules{}, fmt.Errorf("invalid rule %q", text)
		}
		if loc[1] != len(text) {
			return PrincipalRules{}, fmt.Errorf("invalid rule %q, unmatched part %q", text, text[loc[1]:])
		}
		group := func(i int) (string, bool) {
			if loc[2*i] < 0 {
				return "", false
			}
			return text[loc[2*i]:loc[2*i+1]], true
		}
		if _, ok := group(1); ok {
			r.rules = append(r.rules, principalRule{isDefault: true})
			continue
		}
		pattern, ok := group(2)
		if !ok {
			continue // an empty rule
		}
		replacement, _ := group(4)
		flag, _ := group(6)
		rule, err := newPrincipalRule(pattern, replacement, flag)
		if err != nil {
			return PrincipalRules{}, fmt.Errorf("rule %q: %w", text, err)
		}
		r.rules = append(r.rules, rule)
	}
	return r, nil
}

// isJavaTrimmed tells the runes Java's String.trim() removes.
func isJavaTrimmed(r rune) bool { return r <= ' ' }

// String lists the rules as Kafka's SslPrincipalMapper.toString does.
func (r PrincipalRules) String() string {
	parts := make([]string, len(r.rules))
	for i, rule := range r.rules {
		parts[i] = rule.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Principal returns the principal name of the peer of a server-side
// connection, as Kafka's DefaultKafkaPrincipalBuilder does for SSL:
// Anonymous without a verified client certificate, else the certificate's
// subject (SubjectDN) mapped by the rules. An error means no rule applies,
// on which Kafka fails the connection's authentication.
func (r PrincipalRules) Principal(state tls.ConnectionState) (string, error) {
	if len(state.PeerCertificates) == 0 || len(state.VerifiedChains) == 0 {
		return Anonymous, nil
	}
	dn, err := SubjectDN(state.PeerCertificates[0])
	if err != nil {
		return "", err
	}
	return r.Map(dn)
}

// Map applies the first rule that matches the distinguished name.
func (r PrincipalRules) Map(dn string) (string, error) {
	for _, rule := range r.rules {
		if name, ok := rule.apply(dn); ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("tlsconf: no rule of %s applies to %q", r, dn)
}

type principalRule struct {
	isDefault    bool
	pattern      string // as written, for String
	replacement  string // as written, for String
	lower, upper bool
	whole        *regexp.Regexp // the pattern, anchored at both ends
	find         *regexp.Regexp // the pattern
	after        *regexp.Regexp // one rune, then the pattern: see replaceAll
	template     []replacementPart
}

func newPrincipalRule(pattern, replacement, flag string) (principalRule, error) {
	find, err := regexp.Compile(pattern)
	if err != nil {
		return principalRule{}, fmt.Errorf("pattern: %w", err)
	}
	// Wrap the pattern as Go prints it back, which closes any \Q that
	// would otherwise swallow the wrapping.
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return principalRule{}, fmt.Errorf("pattern: %w", err)
	}
	canon := parsed.String()
	tmpl, err := parseReplacement(replacement, find)
	if err != nil {
		return principalRule{}, fmt.Errorf("replacement: %w", err)
	}
	return principalRule{
		pattern:     pattern,
		replacement: replacement,
		lower:       flag == "L",
		upper:       flag == "U",
		whole:       regexp.MustCompile(`\A(?:` + canon + `)\z`),
		find:        find,
		after:       regexp.MustCompile(`\A(?s:.)(?:` + canon + `)`),
		template:    tmpl,
	}, nil
}

func (r principalRule) String() string {
	if r.isDefault {
		return "DEFAULT"
	}
	s := "RULE:" + r.pattern + "/" + r.replacement
	switch {
	case r.lower:
		s += "/L"
	case r.upper:
		s += "/U"
	}
	return s
}

// apply is Kafka's SslPrincipalMapper.Rule.apply: if the pattern matches the
// whole name, the result is name.replaceAll(pattern, replacement), cased as
// asked.
func (r principalRule) apply(dn string) (string, bool) {
	if r.isDefault {
		return dn, true
	}
	if !r.whole.MatchString(dn) {
		return "", false
	}
	out := r.replaceAll(dn)
	switch {
	case r.lower:
		out = strings.ToLower(out)
	case r.upper:
		out = strings.ToUpper(out)
	}
	return out, true
}

// replaceAll is Java's String.replaceAll, which replaces every match, not
// only the whole-name one apply checked: "a".replaceAll(".*", "x") is "xx",
// the second match being the empty one at the end. Go's FindAll finds the
// same matches except that it drops an empty match right after a non-empty
// one; such a match is looked for with r.after, which rereads the rune
// before it so that ^, \b and the like see the same context.
func (r principalRule) replaceAll(dn string) string {
	var b strings.Builder
	last := 0
	emit := func(loc []int) {
		b.WriteString(dn[last:loc[0]])
		for _, p := range r.template {
			if p.group < 0 {
				b.WriteString(p.literal)
			} else if loc[2*p.group] >= 0 {
				b.WriteString(dn[loc[2*p.group]:loc[2*p.group+1]])
			}
		}
		last = loc[1]
	}
	for _, loc := range r.find.FindAllStringSubmatchIndex(dn, -1) {
		emit(loc)
		if end := loc[1]; end > loc[0] {
			_, w := utf8.DecodeLastRuneInString(dn[:end])
			at := r.after.FindStringSubmatchIndex(dn[end-w:])
			if at != nil && at[1] == w {
				for i := range at {
					if at[i] >= 0 {
						at[i] += end - w
					}
				}
				at[0] = end
				emit(at)
			}
		}
	}
	b.WriteString(dn[last:])
	return b.String()
}

// replacementPart is literal text (group < 0) or a group's match.
type replacementPart struct {
	literal string
	group   int
}

// parseReplacement reads a replacement as java.util.regex.Matcher does:
// \x is x, $n is group n taking as many digits as name an existing group,
// ${name} is a named group. Kafka first escapes a $n whose first digit
// names no group, so that it stays literal (escapeLiteralBackReferences,
// from NiFi); that is done here while parsing, without Kafka's slip of
// misplacing the escape of a second such reference.
func parseReplacement(s string, re *regexp.Regexp) ([]replacementPart, error) {
	groups := re.NumSubexp()
	var parts []replacementPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, replacementPart{literal: lit.String(), group: -1})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '\\':
			i++
			if i == len(s) {
				return nil, errors.New("character to be escaped is missing")
			}
			_, w := utf8.DecodeRuneInString(s[i:])
			lit.WriteString(s[i : i+w])
			i += w
		case '$':
			i++
			if i == len(s) {
				return nil, errors.New("illegal group reference: group index is missing")
			}
			if s[i] == '{' {
				end := i + 1
				for end < len(s) && isASCIIAlnum(s[end]) {
					end++
				}
				name := s[i+1 : end]
				switch {
				case name == "":
					return nil, errors.New("named capturing group has 0 length name")
				case end == len(s) || s[end] != '}':
					return nil, errors.New("named capturing group is missing trailing '}'")
				case name[0] >= '0' && name[0] <= '9':
					return nil, fmt.Errorf("capturing group name {%s} starts with digit character", name)
				}
				idx := re.SubexpIndex(name)
				if idx < 0 {
					return nil, fmt.Errorf("no group with name {%s}", name)
				}
				flush()
				parts = append(parts, replacementPart{group: idx})
				i = end + 1
				continue
			}
			if s[i] < '0' || s[i] > '9' {
				return nil, errors.New("illegal group reference")
			}
			ref := int(s[i] - '0')
			if ref > groups {
				if groups == 0 {
					return nil, fmt.Errorf("no group %d", ref)
				}
				lit.WriteByte('$') // Kafka keeps it literal; the digits follow as text
				continue
			}
			for i++; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
				next := ref*10 + int(s[i]-'0')
				if next > groups {
					break
				}
				ref = next
			}
			flush()
			parts = append(parts, replacementPart{group: ref})
		default:
			lit.WriteByte(c)
			i++
		}
	}
	flush()
	return parts, nil
}

func isASCIIAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
