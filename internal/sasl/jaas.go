package sasl

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// JAAS is one login module entry of a sasl.jaas.config value:
//
//	<login module class> <flag> (<name>=<value>)* ;
//
// for example
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required
//	    username="admin" password="admin-secret" user_alice="alice-secret";
//
// Options hold passwords: never log a JAAS value or its Options.
type JAAS struct {
	LoginModule string
	// Flag is the control flag in lower case: required, requisite,
	// sufficient or optional. Kafka checks it and otherwise ignores it.
	Flag    string
	Options map[string]string
}

// PlainUsers is the user_<name>="<password>" options of a PlainLoginModule
// entry, keyed by name: the users a PLAIN listener accepts.
func (j JAAS) PlainUsers() map[string]string {
	users := map[string]string{}
	for k, v := range j.Options {
		if name, ok := strings.CutPrefix(k, "user_"); ok && name != "" {
			users[name] = v
		}
	}
	return users
}

// Username is the username option: who the broker logs in as when it is
// the client (inter-broker).
func (j JAAS) Username() string { return j.Options["username"] }

// Password is the password option; see Username.
func (j JAAS) Password() string { return j.Options["password"] }

// ParseJAAS parses a sasl.jaas.config value the way Kafka's JaasConfig
// does (a java.io.StreamTokenizer): words are runs of anything but
// whitespace, '=', ';', '/' and quotes; values may be in double or
// single quotes and then take Java escapes (\n, \t, \\, \", octal \ooo);
// "//" and "/*...*/" are comments, as is a lone '/' to the end of the
// line; the entry must end with ';'. Like Kafka's broker it wants exactly
// one entry. Unlike Kafka it refuses a quoted value left open at the end
// of a line or of the input (Kafka silently ends it there). A repeated
// option keeps its last value, as in Kafka.
//
// Errors name options, never values, since values are passwords.
func ParseJAAS(s string) (JAAS, error) {
	if !utf8.ValidString(s) {
		return JAAS{}, errors.New("sasl.jaas.config: not valid UTF-8")
	}
	p := jaasParser{lex: jaasLexer{s: s}}
	var entries []JAAS
	for {
		t, err := p.lex.next()
		if err != nil {
			return JAAS{}, fmt.Errorf("sasl.jaas.config: login module name: %w", err)
		}
		if t.kind == tokEOF {
			break
		}
		e, err := p.entry(t)
		if err != nil {
			return JAAS{}, fmt.Errorf("sasl.jaas.config: %w", err)
		}
		entries = append(entries, e)
	}
	switch len(entries) {
	case 0:
		return JAAS{}, errors.New("sasl.jaas.config: no login module")
	case 1:
		return entries[0], nil
	default:
		return JAAS{}, fmt.Errorf("sasl.jaas.config: %d login modules, want 1", len(entries))
	}
}

type jaasParser struct{ lex jaasLexer }

// entry parses one entry whose first token is first.
func (p *jaasParser) entry(first token) (JAAS, error) {
	if !first.isString() {
		return JAAS{}, errors.New("expected a login module class name")
	}
	e := JAAS{LoginModule: first.text, Options: map[string]string{}}
	t, err := p.lex.next()
	if err != nil {
		return JAAS{}, fmt.Errorf("control flag of %s: %w", e.LoginModule, err)
	}
	if !t.isString() {
		return JAAS{}, fmt.Errorf("no control flag after login module %s", e.LoginModule)
	}
	switch flag := strings.ToLower(t.text); flag {
	case "required", "requisite", "sufficient", "optional":
		e.Flag = flag
	default:
		return JAAS{}, fmt.Errorf("control flag of login module %s must be required, requisite, sufficient or optional", e.LoginModule)
	}
	// after says where we are for error messages, by option name only.
	after := "the control flag"
	for {
		t, err := p.lex.next()
		if err != nil {
			return JAAS{}, fmt.Errorf("after %s: %w", after, err)
		}
		if t.kind == tokSemicolon {
			return e, nil
		}
		if t.kind == tokEOF {
			return JAAS{}, fmt.Errorf("expected ';' after %s", after)
		}
		// A word not followed by '=' may well be the tail of an unquoted
		// password with a space in it, so it is not echoed.
		if !t.isString() {
			return JAAS{}, fmt.Errorf("expected name=value or ';' after %s", after)
		}
		name := t.text
		if t, err = p.lex.next(); err != nil {
			return JAAS{}, fmt.Errorf("after %s: %w", after, err)
		}
		if t.kind != tokEquals {
			return JAAS{}, fmt.Errorf("expected name=value or ';' after %s", after)
		}
		t, err = p.lex.next()
		if err != nil {
			return JAAS{}, fmt.Errorf("value of option %s: %w", name, err)
		}
		if !t.isString() {
			return JAAS{}, fmt.Errorf("no value for option %s", name)
		}
		e.Options[name] = t.text
		after = "option " + name
	}
}

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokWord
	tokQuoted
	tokSemicolon
	tokEquals
	tokOther // a character StreamTokenizer treats as a token of its own
)

type token struct {
	kind tokenKind
	text string
}

func (t token) isString() bool { return t.kind == tokWord || t.kind == tokQuoted }

// jaasLexer reproduces the StreamTokenizer set up by Kafka's JaasConfig.
type jaasLexer struct {
	s   string
	pos int
}

func (l *jaasLexer) peek() (rune, int) {
	if l.pos >= len(l.s) {
		return -1, 0
	}
	return utf8.DecodeRuneInString(l.s[l.pos:])
}

// wordRune is StreamTokenizer's word class under JaasConfig's setup:
// wordChars(32, 128) and (160, 255), everything from 256 up, minus the
// whitespace, ordinary, comment and quote characters set after.
func wordRune(r rune) bool {
	switch r {
	case ';', '=', '/', '"', '\'':
		return false
	}
	return (r > ' ' && r <= 128) || r >= 160
}

func (l *jaasLexer) skipLine() {
	for l.pos < len(l.s) && l.s[l.pos] != '\n' && l.s[l.pos] != '\r' {
		l.pos++
	}
}

func (l *jaasLexer) next() (token, error) {
	for {
		r, n := l.peek()
		switch {
		case r < 0:
			return token{kind: tokEOF}, nil
		case r <= ' ':
			l.pos += n
		case r == '/':
			l.pos++
			if strings.HasPrefix(l.s[l.pos:], "*") {
				end := strings.Index(l.s[l.pos+1:], "*/")
				if end < 0 {
					// StreamTokenizer ends the input at an open comment.
					l.pos = len(l.s)
					return token{kind: tokEOF}, nil
				}
				l.pos += 1 + end + 2
				continue
			}
			// "//" and, since '/' is also a comment character, a lone '/'
			// both run to the end of the line.
			l.skipLine()
		case r == ';':
			l.pos++
			return token{kind: tokSemicolon}, nil
		case r == '=':
			l.pos++
			return token{kind: tokEquals}, nil
		case r == '"' || r == '\'':
			l.pos++
			return l.quoted(r)
		case wordRune(r):
			start := l.pos
			for {
				r, n := l.peek()
				if r < 0 || !wordRune(r) {
					break
				}
				l.pos += n
			}
			return token{kind: tokWord, text: l.s[start:l.pos]}, nil
		default:
			l.pos += n
			return token{kind: tokOther}, nil
		}
	}
}

// quoted reads a quoted string after its opening quote q, with
// StreamTokenizer's escapes.
func (l *jaasLexer) quoted(q rune) (token, error) {
	var b strings.Builder
	for {
		r, n := l.peek()
		switch {
		case r < 0 || r == '\n' || r == '\r':
			return token{}, errors.New("unterminated quoted string")
		case r == q:
			l.pos += n
			return token{kind: tokQuoted, text: b.String()}, nil
		case r != '\\':
			b.WriteRune(r)
			l.pos += n
			continue
		}
		l.pos += n
		r, n = l.peek()
		if r < 0 {
			return token{}, errors.New("unterminated quoted string")
		}
		l.pos += n
		if r >= '0' && r <= '7' {
			// Up to three octal digits, the third only if the first is
			// 0-3, so the value stays within \377.
			v, first := r-'0', r
			for digits := 1; digits < 3; digits++ {
				d, dn := l.peek()
				if d < '0' || d > '7' || (digits == 2 && first > '3') {
					break
				}
				v = v<<3 + d - '0'
				l.pos += dn
			}
			b.WriteRune(v)
			continue
		}
		switch r {
		case 'a':
			r = 0x7
		case 'b':
			r = '\b'
		case 'f':
			r = 0xc
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'v':
			r = 0xb
		}
		b.WriteRune(r)
	}
}
