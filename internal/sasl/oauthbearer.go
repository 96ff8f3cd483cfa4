package sasl

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// OAUTHBEARER (RFC 7628, KIP-255) with Kafka's default token handling: an
// unsecured JWT (alg "none", no signature) checked by claims only, as
// Kafka's OAuthBearerUnsecuredValidatorCallbackHandler does. Anyone can
// make such a token for any principal, so this is for development, as in
// Kafka; a broker that must trust its tokens needs a signed-token
// validator (Kafka's OIDC handler, KIP-768), which kbroker does not have.
//
// The exchange, as Kafka's OAuthBearerSaslServer:
//
//	client: n,[a=<authzid>],^Aauth=Bearer <token>^A[<key>=<value>^A]*^A
//	server: empty (authenticated), or a JSON error such as
//	        {"status":"invalid_token"}, after which the client sends ^A
//	        and the exchange fails with that JSON as its message.

// unsecuredValidatorClass is the only server callback handler kbroker
// implements, Kafka's default for OAUTHBEARER.
const unsecuredValidatorClass = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"

// CheckOAuthBearerCallbackHandler refuses a
// [listener.name.<l>.oauthbearer.]sasl.server.callback.handler.class other
// than Kafka's unsecured validator (or none, which means it).
func CheckOAuthBearerCallbackHandler(class string) error {
	if class == "" || class == unsecuredValidatorClass {
		return nil
	}
	return fmt.Errorf("sasl.server.callback.handler.class %s is not supported for OAUTHBEARER: kbroker validates unsecured JWTs only (Kafka's default, %s), for development", class, unsecuredValidatorClass)
}

// unsecuredLoginClass is the only login callback handler kbroker
// implements (for its own inter-broker token), Kafka's default.
const unsecuredLoginClass = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredLoginCallbackHandler"

// CheckOAuthBearerLoginCallbackHandler refuses a
// [listener.name.<l>.oauthbearer.]sasl.login.callback.handler.class other
// than Kafka's unsecured one (or none, which means it): a broker set up to
// fetch signed tokens would otherwise log in with an unsecured one.
func CheckOAuthBearerLoginCallbackHandler(class string) error {
	if class == "" || class == unsecuredLoginClass {
		return nil
	}
	return fmt.Errorf("sasl.login.callback.handler.class %s is not supported for OAUTHBEARER: kbroker makes unsecured tokens only (Kafka's default, %s)", class, unsecuredLoginClass)
}

// Validate checks token as the exchange does at now, for a broker's own
// token: nil, or why the validator refuses it.
func (v *UnsecuredValidator) Validate(token string, now time.Time) error {
	if _, terr := v.validate(token, now); terr != nil {
		return fmt.Errorf("%s: %s", terr.status, terr.reason)
	}
	return nil
}

// UnsecuredValidator checks unsecured JWTs. Its fields are the
// unsecuredValidator* options of the listener's OAuthBearerLoginModule
// JAAS entry.
type UnsecuredValidator struct {
	// PrincipalClaim names the claim holding the principal
	// (unsecuredValidatorPrincipalClaimName, default "sub").
	PrincipalClaim string
	// ScopeClaim names the claim holding the scope
	// (unsecuredValidatorScopeClaimName, default "scope").
	ScopeClaim string
	// RequiredScope must all be in a token's scope
	// (unsecuredValidatorRequiredScope, space separated).
	RequiredScope []string
	// ClockSkew is how far iat may lie in the future and exp in the past
	// (unsecuredValidatorAllowableClockSkewMs, default 0).
	ClockSkew time.Duration
}

// UnsecuredValidator reads the validator options of an OAuthBearerLoginModule
// entry, as Kafka's unsecured validator does.
func (j JAAS) UnsecuredValidator() (UnsecuredValidator, error) {
	v := UnsecuredValidator{PrincipalClaim: "sub", ScopeClaim: "scope"}
	if s := javaTrim(j.Options["unsecuredValidatorPrincipalClaimName"]); s != "" {
		v.PrincipalClaim = s
	}
	if s := javaTrim(j.Options["unsecuredValidatorScopeClaimName"]); s != "" {
		v.ScopeClaim = s
	}
	if s := javaTrim(j.Options["unsecuredValidatorRequiredScope"]); s != "" {
		// Kafka's OAuthBearerScopeUtils splits on spaces only: a tab is
		// part of an item, and an invalid one.
		for _, item := range strings.Split(s, " ") {
			if item == "" {
				continue
			}
			if !validScopeToken(item) {
				return v, fmt.Errorf("unsecuredValidatorRequiredScope: invalid scope token %q (RFC 6749: printable ASCII but space, '\"' and '\\')", item)
			}
			v.RequiredScope = append(v.RequiredScope, item)
		}
	}
	if s := javaTrim(j.Options["unsecuredValidatorAllowableClockSkewMs"]); s != "" {
		ms, err := strconv.ParseInt(s, 10, 32)
		if err != nil || ms < 0 {
			return v, fmt.Errorf("unsecuredValidatorAllowableClockSkewMs: %q is not a number of milliseconds >= 0", s)
		}
		v.ClockSkew = time.Duration(ms) * time.Millisecond
	}
	return v, nil
}

// javaTrim is Java's String.trim, which Kafka applies to claims and
// options: it strips the characters up to and including space (controls
// too), and no other Unicode space.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// validScopeToken is RFC 6749's scope-token: %x21 / %x23-5B / %x5D-7E.
func validScopeToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return s != ""
}

// clientInitialResponse is Kafka's OAuthBearerClientInitialResponse
// pattern: a GS2 header without channel binding, then key=value pairs,
// each ended by ^A, and a final ^A. The authzid is a SASL name (no '=' or
// ',' but as =3D and =2C); keys are letters; values printable ASCII,
// space, tab, CR and LF.
var clientInitialResponse = regexp.MustCompile(`\An,(?:a=((?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+))?,\x01((?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*)\x01\z`)

// extensionKey and extensionValue are what a client's extensions may be
// (Kafka's EXTENSION_KEY_PATTERN and EXTENSION_VALUE_PATTERN).
var (
	extensionKey   = regexp.MustCompile(`\A[A-Za-z]+\z`)
	extensionValue = regexp.MustCompile(`\A[\x21-\x7e \t\r\n]+\z`)
)

// bearerAuth is the auth value: a scheme and a token of base64/JWT
// characters (Kafka's AUTH_PATTERN).
var bearerAuth = regexp.MustCompile(`\A(\w+) +([-_~+/.a-zA-Z0-9]+=*)\z`)

// parseClientInitialResponse returns the token, the authzid and the
// extensions (the pairs but auth) of an OAUTHBEARER client message; an
// error is a malformed message (Kafka's SaslException).
func parseClientInitialResponse(in []byte) (token, authzid string, extensions map[string]string, err error) {
	m := clientInitialResponse.FindSubmatch(in)
	if m == nil {
		return "", "", nil, errors.New("invalid OAUTHBEARER client first message")
	}
	authzid = string(m[1])
	pairs := map[string]string{}
	for _, kv := range strings.Split(string(m[2]), "\x01") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			pairs[k] = v
		}
	}
	auth, ok := pairs["auth"]
	if !ok {
		return "", "", nil, errors.New("invalid OAUTHBEARER client first message: 'auth' not specified")
	}
	delete(pairs, "auth")
	am := bearerAuth.FindStringSubmatch(auth)
	if am == nil {
		return "", "", nil, errors.New("invalid OAUTHBEARER client first message: invalid 'auth' format")
	}
	if !strings.EqualFold(am[1], "bearer") {
		return "", "", nil, fmt.Errorf("invalid scheme %s in OAUTHBEARER client first message", quote(am[1]))
	}
	return am[2], authzid, pairs, nil
}

// unsecuredToken is a parsed unsecured JWT.
type unsecuredToken struct {
	principal string
	scope     []string
	// issuedAt and expires are the iat and exp claims in seconds; iat
	// may be absent (hasIssuedAt false), exp may not.
	issuedAt    float64
	hasIssuedAt bool
	expires     float64
}

// tokenError is a refused token: what the client is told (status and,
// for a missing scope, the scope required) and why, for the log.
type tokenError struct {
	status string // invalid_token or insufficient_scope
	scope  string // the required scope as Kafka prints a list, or ""
	reason string
}

func (e *tokenError) Error() string { return e.reason }

// challenge is the JSON error RFC 7628 has the server send, formatted as
// Kafka's OAuthBearerSaslServer formats it.
func (e *tokenError) challenge() string {
	s := `{"status":"` + e.status + `"`
	if e.scope != "" {
		s += `, "scope":"` + e.scope + `"`
	}
	return s + "}"
}

func invalidToken(format string, args ...any) *tokenError {
	return &tokenError{status: "invalid_token", reason: fmt.Sprintf(format, args...)}
}

// validate parses token and checks it at now, as Kafka's
// OAuthBearerUnsecuredJws and OAuthBearerUnsecuredValidatorCallbackHandler
// do, in their order.
func (v *UnsecuredValidator) validate(token string, now time.Time) (unsecuredToken, *tokenError) {
	var t unsecuredToken
	if strings.Contains(token, "..") {
		return t, invalidToken("malformed compact serialization contains '..'")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return t, invalidToken("unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
	}
	header, err := jwtSegment(parts[0])
	if err != nil {
		return t, invalidToken("header: %v", err)
	}
	claims, err := jwtSegment(parts[1])
	if err != nil {
		return t, invalidToken("claims: %v", err)
	}
	if alg, ok := header["alg"].(string); !ok {
		return t, invalidToken("JWS header must have an Algorithm value")
	} else if alg != "none" {
		return t, invalidToken("unsecured JWS must have 'none' for an algorithm")
	}
	if parts[2] != "" {
		return t, invalidToken("unsecured JWS must not contain a digital signature")
	}
	if t.scope, err = scopeClaim(claims, v.ScopeClaim); err != nil {
		return t, invalidToken("%v", err)
	}
	exp, ok, err := numberClaim(claims, "exp")
	switch {
	case err != nil:
		return t, invalidToken("%v", err)
	case !ok:
		return t, invalidToken("no expiration time in JWT")
	}
	t.expires = exp
	switch p := claims[v.PrincipalClaim].(type) {
	case string:
		if javaTrim(p) == "" {
			return t, invalidToken("no principal name in JWT claim: %s", v.PrincipalClaim)
		}
		t.principal = p
	case nil:
		return t, invalidToken("no principal name in JWT claim: %s", v.PrincipalClaim)
	default:
		return t, invalidToken("the '%s' claim was not of type String: %s", v.PrincipalClaim, claimType(p))
	}
	if t.issuedAt, t.hasIssuedAt, err = numberClaim(claims, "iat"); err != nil {
		return t, invalidToken("%v", err)
	}
	nowMs, skewMs := float64(now.UnixMilli()), float64(v.ClockSkew.Milliseconds())
	if t.hasIssuedAt && 1000*t.issuedAt > nowMs+skewMs {
		return t, invalidToken("the Issued At value (%f seconds) was after the indicated time (%d ms) plus allowable clock skew (%d ms)", t.issuedAt, now.UnixMilli(), v.ClockSkew.Milliseconds())
	}
	if nowMs-skewMs >= 1000*t.expires {
		return t, invalidToken("the indicated time (%d ms) minus allowable clock skew (%d ms) was on or after the Expiration Time value (%f seconds)", now.UnixMilli(), v.ClockSkew.Milliseconds(), t.expires)
	}
	if t.hasIssuedAt && t.expires <= t.issuedAt {
		return t, invalidToken("the Expiration Time time (%f seconds) was not after the Issued At time (%f seconds)", t.expires, t.issuedAt)
	}
	for _, want := range v.RequiredScope {
		if !slices.Contains(t.scope, want) {
			return t, &tokenError{status: "insufficient_scope", scope: javaList(v.RequiredScope),
				reason: fmt.Sprintf("the provided scope %s was missing a required scope (%s); all required scope elements: %s", quote(javaList(t.scope)), want, javaList(v.RequiredScope))}
		}
	}
	return t, nil
}

// expiry is the token's exp as a time, rounded to the millisecond as Kafka
// rounds the credential's lifetime, and saturated as Java's Math.round
// saturates (an exp in nanoseconds, or infinite, is a session without end).
func (t unsecuredToken) expiry() time.Time {
	ms := math.Round(t.expires * 1000)
	switch {
	case ms >= math.MaxInt64:
		return time.UnixMilli(math.MaxInt64)
	case ms <= math.MinInt64:
		return time.UnixMilli(math.MinInt64)
	}
	return time.UnixMilli(int64(ms))
}

// jwtSegment decodes a header or claims segment: base64 (Kafka's basic
// decoder; the URL-safe alphabet of RFC 7515, which Kafka's own token
// maker and every client use, is taken too), padding optional, holding a
// JSON object. Values become what Kafka's Jackson conversion gives:
// numbers float64, arrays lists of strings, anything else its text.
func jwtSegment(s string) (map[string]any, error) {
	s = strings.NewReplacer("-", "+", "_", "/").Replace(strings.TrimRight(s, "="))
	raw, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("malformed Base64 URL encoded value")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, errors.New("malformed JSON")
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		switch v := v.(type) {
		case json.Number:
			// Out of float64's range is ±Inf or 0 with ErrRange, as
			// Jackson's double is.
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return nil, errors.New("malformed JSON")
			}
			out[k] = f
		case []any:
			list := make([]string, 0, len(v))
			for _, e := range v {
				list = append(list, jsonText(e))
			}
			out[k] = list
		default:
			out[k] = jsonText(v)
		}
	}
	return out, nil
}

// jsonText is Jackson's asText of a value: a string as is, a number or
// boolean as written, null as "null", an object or array as "".
func jsonText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "null"
	default:
		return ""
	}
}

// numberClaim returns a numeric claim; ok is false when it is absent.
func numberClaim(claims map[string]any, name string) (float64, bool, error) {
	switch v := claims[name].(type) {
	case nil:
		return 0, false, nil
	case float64:
		return v, true, nil
	default:
		return 0, false, fmt.Errorf("the '%s' claim was not of type Number: %s", name, claimType(v))
	}
}

// scopeClaim is the scope as Kafka reads it: a string claim is one scope
// item (trimmed; none if blank), a list claim its non-blank items.
func scopeClaim(claims map[string]any, name string) ([]string, error) {
	switch v := claims[name].(type) {
	case nil:
		return nil, nil
	case string:
		if s := javaTrim(v); s != "" {
			return []string{s}, nil
		}
		return nil, nil
	case []string:
		var out []string
		for _, s := range v {
			if s = javaTrim(s); s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("the '%s' claim was not of type List: %s", name, claimType(v))
	}
}

func claimType(v any) string {
	switch v.(type) {
	case float64:
		return "Number"
	case []string:
		return "List"
	default:
		return "String"
	}
}

// javaList formats items as Java's List.toString, which Kafka puts in the
// insufficient_scope error.
func javaList(items []string) string { return "[" + strings.Join(items, ", ") + "]" }

// oauthExchange is one OAUTHBEARER exchange.
type oauthExchange struct {
	validator *UnsecuredValidator
	now       func() time.Time
	// refused is the token error sent as a challenge: the client's ^A
	// that follows ends the exchange with it.
	refused   *tokenError
	over      bool
	principal string
	expires   time.Time
}

func (e *oauthExchange) Step(in []byte) ([]byte, bool, error) {
	if e.over {
		return nil, false, ErrExchangeOver
	}
	if refused := e.refused; refused != nil {
		e.refused = nil
		if len(in) == 1 && in[0] == 0x01 {
			e.over = true
			// Kafka passes this one through: the client learns the JSON
			// status it was already sent, nothing more.
			return nil, false, &AuthError{Mechanism: OAuthBearer, Message: refused.challenge(), Reason: "token refused: " + refused.reason}
		}
		// Anything else is a new first message, as in Kafka.
	}
	token, authzid, _, err := parseClientInitialResponse(in)
	if err != nil {
		e.over = true
		return nil, false, genericFailure(OAuthBearer, err.Error())
	}
	t, terr := e.validator.validate(token, e.now())
	if terr != nil {
		e.refused = terr
		return []byte(terr.challenge()), false, nil
	}
	e.over = true
	if authzid != "" && authzid != t.principal {
		return nil, false, &AuthError{Mechanism: OAuthBearer,
			Message: fmt.Sprintf("Authentication failed: Client requested an authorization id (%s) that is different from the token's principal name (%s)", authzid, t.principal),
			Reason:  "token of " + quote(t.principal) + " with authorization id " + quote(authzid)}
	}
	// The unsecured validator accepts every extension (Kafka's does), and
	// kbroker has no use for them.
	e.principal, e.expires = t.principal, t.expiry()
	return []byte{}, true, nil
}

func (e *oauthExchange) Principal() string { return e.principal }

// CredentialExpiry is the token's expiration: the session may not outlive
// it (Kafka's CREDENTIAL_LIFETIME_MS).
func (e *oauthExchange) CredentialExpiry() time.Time { return e.expires }

// Expiring is an Exchange whose credential expires (OAUTHBEARER's token);
// CredentialExpiry is valid once the exchange succeeded.
type Expiring interface {
	CredentialExpiry() time.Time
}

// UnsecuredLoginToken makes the unsecured JWT Kafka's
// OAuthBearerUnsecuredLoginCallbackHandler makes from an
// OAuthBearerLoginModule entry's unsecuredLogin* options, for this broker's
// own connections: unsecuredLoginStringClaim_<name>, ..NumberClaim_<name>,
// ..ListClaim_<name> (the value's first character separates the items),
// unsecuredLoginPrincipalClaimName (default sub), unsecuredLoginLifetimeSeconds
// (default 3600); iat is now and exp now plus the lifetime. It also
// returns the unsecuredLoginExtension_<name> options as extensions.
func UnsecuredLoginToken(options map[string]string, now time.Time) (token string, extensions map[string]string, err error) {
	const prefix = "unsecuredLogin"
	principalClaim := javaTrim(options[prefix+"PrincipalClaimName"])
	if principalClaim == "" {
		principalClaim = "sub"
	}
	lifetime := int64(3600)
	if s, ok := options[prefix+"LifetimeSeconds"]; ok {
		if lifetime, err = strconv.ParseInt(strings.TrimSpace(s), 10, 64); err != nil || lifetime <= 0 {
			return "", nil, fmt.Errorf("%sLifetimeSeconds: %q is not a number of seconds > 0", prefix, s)
		}
	}
	claims := map[string]any{}
	extensions = map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(options)) {
		val := options[k]
		var name string
		var claim any
		switch {
		case strings.HasPrefix(k, prefix+"StringClaim_"):
			name, claim = strings.TrimPrefix(k, prefix+"StringClaim_"), val
		case strings.HasPrefix(k, prefix+"NumberClaim_"):
			name = strings.TrimPrefix(k, prefix+"NumberClaim_")
			f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err != nil {
				return "", nil, fmt.Errorf("%s: %q is not a number", k, val)
			}
			claim = f
		case strings.HasPrefix(k, prefix+"ListClaim_"):
			name = strings.TrimPrefix(k, prefix+"ListClaim_")
			items := []string{}
			if len(val) > 1 {
				items = strings.Split(val[1:], val[:1])
			}
			claim = items
		case strings.HasPrefix(k, prefix+"Extension_"):
			ext := strings.TrimPrefix(k, prefix+"Extension_")
			if ext == "auth" || !extensionKey.MatchString(ext) || !extensionValue.MatchString(val) {
				return "", nil, fmt.Errorf("%s: invalid extension name or value", k)
			}
			extensions[ext] = val
			continue
		default:
			continue
		}
		if name == "" {
			continue
		}
		if name == "iat" || name == "exp" {
			return "", nil, fmt.Errorf("%s: the %s claim is set by the token maker", k, name)
		}
		claims[name] = claim
	}
	if p, _ := claims[principalClaim].(string); javaTrim(p) == "" {
		return "", nil, fmt.Errorf("no principal: set %sStringClaim_%s", prefix, principalClaim)
	}
	nowSec := float64(now.UnixMilli()) / 1000
	claims["iat"] = nowSec
	claims["exp"] = nowSec + float64(lifetime)
	token, err = EncodeUnsecuredJWT(claims)
	return token, extensions, err
}

// EncodeUnsecuredJWT returns the unsecured JWT (alg none, empty signature)
// of claims, base64url without padding as RFC 7515 has it.
func EncodeUnsecuredJWT(claims map[string]any) (string, error) {
	body, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encoding JWT claims: %w", err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString(body) + ".", nil
}
