package acl

// Kafka's ZooKeeper layout for ACLs (ZK mode, kafka.zk.ZkData: ZkAclStore,
// ResourceZNode, ZkAclChangeStore), kept byte-compatible so kafka-acls.sh
// --authorizer-properties zookeeper.connect=..., zkCli.sh and Kafka brokers
// sharing the ensemble read what we write and the other way round:
//
//	/kafka-acl/<Type>/<name>                     literal patterns ("*" included)
//	/kafka-acl-extended/prefixed/<Type>/<name>   prefixed patterns
//	/kafka-acl-changes/acl_changes_<seq>         change of a literal pattern:
//	                                             "TOPIC:name" (the Java enum name)
//	/kafka-acl-extended-changes/acl_changes_<seq> change of a prefixed pattern:
//	                                             {"version":1,"resourceType":"TOPIC",
//	                                              "name":"...","patternType":"PREFIXED"}
//
// <Type> is SecurityUtils.resourceTypeName ("Topic", "TransactionalId").
// A resource znode holds AclEntry.toJsonCompatibleMap:
//
//	{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}
//
// Names are not escaped: Kafka puts the resource name into the path as it
// is, and its AclAuthorizer.createAcls refuses names containing '/' (an
// INVALID_REQUEST "Failed to create ACL" whose cause is "ACL binding
// contains invalid resource name: <name>"). Topic names cannot contain '/'
// anyway; group and transactional ids can, and such ids simply cannot have
// ACLs of their own in ZK mode: only "*" or a prefix without '/' covers
// them. Names ZooKeeper itself refuses as a path component ("", ".", "..",
// control characters: PathUtils.validatePath) are refused here too.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ZooKeeper paths, as Kafka names them.
const (
	// LiteralRoot holds one child per resource type, then one per literal
	// pattern name (LiteralAclStore).
	LiteralRoot = "/kafka-acl"
	// ExtendedRoot holds one child per non-literal pattern type, lower
	// case: only "prefixed" exists (ExtendedAclZNode, ExtendedAclStore).
	ExtendedRoot = "/kafka-acl-extended"
	// PrefixedRoot is ExtendedRoot's prefixed store.
	PrefixedRoot = ExtendedRoot + "/prefixed"
	// LiteralChanges is where a change to a literal pattern is announced
	// (LiteralAclChangeStore).
	LiteralChanges = "/kafka-acl-changes"
	// ExtendedChanges is where a change to a prefixed pattern is announced
	// (ExtendedAclChangeStore).
	ExtendedChanges = "/kafka-acl-extended-changes"
	// ChangePrefix starts the name of every change notification znode,
	// created persistent sequential under LiteralChanges or
	// ExtendedChanges (ZkAclChangeStore.SequenceNumberPrefix).
	ChangePrefix = "acl_changes_"
)

// znodeVersion is the only ACL znode and change event JSON version Kafka
// writes or accepts (AclEntry.CurrentVersion,
// ExtendedAclChangeEvent.currentVersion).
const znodeVersion = 1

// storeTypes are the resource types Kafka creates a child for under each
// ACL root (AclEntry.ResourceTypes: every type but Unknown and Any).
func storeTypes() []kmsg.ACLResourceType {
	return []kmsg.ACLResourceType{ResourceTopic, ResourceGroup, ResourceCluster,
		ResourceTransactionalID, ResourceDelegationToken, ResourceUser}
}

// SetupPaths lists the persistent znodes Kafka creates at start
// (KafkaZkClient.createAclPaths), parents before children: each store
// root with a child per resource type, then the two change roots.
func SetupPaths() []string {
	paths := []string{LiteralRoot}
	for _, t := range storeTypes() {
		paths = append(paths, LiteralRoot+"/"+ResourceTypeName(t))
	}
	paths = append(paths, ExtendedRoot, PrefixedRoot)
	for _, t := range storeTypes() {
		paths = append(paths, PrefixedRoot+"/"+ResourceTypeName(t))
	}
	return append(paths, LiteralChanges, ExtendedChanges)
}

// storeRoot is the root under which a pattern type's znodes live.
func storeRoot(p kmsg.ACLResourcePatternType) (string, error) {
	switch p {
	case PatternLiteral:
		return LiteralRoot, nil
	case PatternPrefixed:
		return PrefixedRoot, nil
	default:
		return "", fmt.Errorf("acl: no znode for pattern type %v: only LITERAL and PREFIXED patterns are stored", p)
	}
}

// storableType tells whether Kafka stores ACLs for a resource type.
func storableType(t kmsg.ACLResourceType) bool {
	return t >= ResourceTopic && t <= ResourceUser
}

// ValidateName refuses a resource name that cannot be a znode name:
// AclApis's empty-name check, Kafka's '/' check
// (AclAuthorizer.validateAclBinding) and ZooKeeper's own path component
// rules (PathUtils.validatePath: not "." or "..", no NUL, no control or
// non-character code points). The error is an *InvalidRequestError.
func ValidateName(name string) error {
	switch {
	case name == "":
		return invalidf("Invalid empty resource name")
	case strings.Contains(name, "/"):
		return invalidf("ACL binding contains invalid resource name: %s", clip(name))
	case name == "." || name == "..":
		return invalidf("invalid resource name %q: ZooKeeper refuses the path components \".\" and \"..\"", name)
	}
	for i, r := range name {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(name[i:]); size <= 1 {
				return invalidf("invalid resource name %q: not UTF-8", clip(name))
			}
		}
		if zkInvalidRune(r) {
			return invalidf("invalid resource name %q: ZooKeeper refuses the character %U in a path", clip(name), r)
		}
	}
	return nil
}

// zkInvalidRune are the characters ZooKeeper's PathUtils.validatePath
// refuses (it works on UTF-16 units; surrogates cannot occur in Go text).
func zkInvalidRune(r rune) bool {
	return r == 0 ||
		(r > 0x00 && r <= 0x1f) ||
		(r >= 0x7f && r <= 0x9f) ||
		(r >= 0xd800 && r <= 0xf8ff) ||
		(r >= 0xfff0 && r <= 0xffff)
}

// ZNodePath is the znode holding the ACLs of a resource pattern
// (ResourceZNode.path).
func ZNodePath(r Resource) (string, error) {
	root, err := storeRoot(r.Pattern)
	if err != nil {
		return "", err
	}
	if !storableType(r.Type) {
		return "", fmt.Errorf("acl: no znode for resource type %v", r.Type)
	}
	if err := ValidateName(r.Name); err != nil {
		return "", err
	}
	return root + "/" + ResourceTypeName(r.Type) + "/" + r.Name, nil
}

// ParseZNodePath is ZNodePath's inverse. The type component is read as
// Kafka's loadAllAcls does (SecurityUtils.resourceType, any case); a type
// Kafka would not know is an error, for the caller to log and skip.
func ParseZNodePath(path string) (Resource, error) {
	var rest string
	var pattern kmsg.ACLResourcePatternType
	switch {
	case strings.HasPrefix(path, PrefixedRoot+"/"):
		rest, pattern = path[len(PrefixedRoot)+1:], PatternPrefixed
	case strings.HasPrefix(path, LiteralRoot+"/"):
		rest, pattern = path[len(LiteralRoot)+1:], PatternLiteral
	default:
		return Resource{}, fmt.Errorf("acl: %q is not under %s or %s", clip(path), LiteralRoot, PrefixedRoot)
	}
	typeName, name, ok := strings.Cut(rest, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return Resource{}, fmt.Errorf("acl: %q is not <root>/<resource type>/<resource name>", clip(path))
	}
	t := ParseResourceType(typeName)
	if !storableType(t) {
		return Resource{}, fmt.Errorf("acl: unknown resource type %q in %q", clip(typeName), clip(path))
	}
	return Resource{Type: t, Name: name, Pattern: pattern}, nil
}

// EncodeZNode is the data of a resource znode (ResourceZNode.encode):
// AclEntry.toJsonCompatibleMap with Kafka's key order and names. Kafka
// holds the entries in a set, so a repeated entry is written once. An
// empty list encodes as an empty "acls" array, but Kafka deletes the znode
// instead of writing that (AclAuthorizer.updateResourceAcls).
func EncodeZNode(entries []Entry) []byte {
	var b bytes.Buffer
	b.WriteString(`{"version":1,"acls":[`)
	seen := make(map[Entry]struct{}, len(entries))
	for _, e := range entries {
		if _, dup := seen[e]; dup {
			continue
		}
		if len(seen) > 0 {
			b.WriteByte(',')
		}
		seen[e] = struct{}{}
		b.WriteString(`{"principal":`)
		writeJSONString(&b, e.Principal)
		b.WriteString(`,"permissionType":`)
		writeJSONString(&b, PermissionName(e.Permission))
		b.WriteString(`,"operation":`)
		writeJSONString(&b, OperationName(e.Operation))
		b.WriteString(`,"host":`)
		writeJSONString(&b, e.Host)
		b.WriteByte('}')
	}
	b.WriteString("]}")
	return b.Bytes()
}

// DecodeZNode reads a resource znode's data as AclEntry.fromBytes: empty
// data is no entries; the version must be 1; each entry needs the four
// keys (other keys are ignored); a principal must be "type:name". An
// operation or permission name this version does not know reads as
// Unknown, as in Kafka: such an entry never grants or denies anything,
// but it still counts as an ACL on the resource. Repeated entries are
// returned once. Kafka reads data that is not JSON at all as no entries
// (Json.parseBytes gives None); here it is an error, so the caller can log
// it rather than silently open or close the resource.
func DecodeZNode(data []byte) ([]Entry, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var doc struct {
		Version json.RawMessage
		ACLs    []json.RawMessage
	}
	if err := decodeExactKeys(data, map[string]any{"version": &doc.Version, "acls": &doc.ACLs}); err != nil {
		return nil, fmt.Errorf("acl: decoding ACL znode (%d bytes %s): %w", len(data), quoteClip(data), err)
	}
	if err := checkVersion(doc.Version); err != nil {
		return nil, fmt.Errorf("acl: decoding ACL znode: %w", err)
	}
	if doc.ACLs == nil {
		return nil, errors.New(`acl: decoding ACL znode: no "acls" array`)
	}
	entries := make([]Entry, 0, len(doc.ACLs))
	seen := make(map[Entry]struct{}, len(doc.ACLs))
	for i, raw := range doc.ACLs {
		e, err := decodeEntry(raw)
		if err != nil {
			return nil, fmt.Errorf("acl: decoding ACL znode: entry %d: %w", i, err)
		}
		if _, dup := seen[e]; dup {
			continue
		}
		seen[e] = struct{}{}
		entries = append(entries, e)
	}
	return entries, nil
}

func decodeEntry(raw json.RawMessage) (Entry, error) {
	var principal, permission, operation, host *string
	err := decodeExactKeys(raw, map[string]any{
		"principal": &principal, "permissionType": &permission, "operation": &operation, "host": &host,
	})
	if err != nil {
		return Entry{}, err
	}
	for _, f := range []struct {
		key string
		v   *string
	}{{"principal", principal}, {"permissionType", permission}, {"operation", operation}, {"host", host}} {
		if f.v == nil {
			return Entry{}, fmt.Errorf("missing %q", f.key)
		}
	}
	if err := ValidatePrincipal(*principal); err != nil {
		return Entry{}, err
	}
	e := Entry{
		Principal:  *principal,
		Host:       *host,
		Operation:  ParseOperation(*operation),
		Permission: ParsePermission(*permission),
	}
	// AccessControlEntry's constructor refuses the filter-only values.
	if e.Operation == OpAny {
		return Entry{}, errors.New("operation must not be ANY")
	}
	if e.Permission == PermissionAny {
		return Entry{}, errors.New("permissionType must not be ANY")
	}
	return e, nil
}

// ValidatePrincipal checks the "type:name" form of a principal as
// SecurityUtils.parseKafkaPrincipal: not empty and containing a ':'. The
// error is an *InvalidRequestError.
func ValidatePrincipal(p string) error {
	if p == "" || !strings.Contains(p, ":") {
		return invalidf("expected a string in format principalType:principalName but got %s", clip(p))
	}
	return nil
}

// ChangeNotification is the change event announcing that a pattern's
// ACLs changed: the parent under which to create a persistent sequential
// znode named ChangePrefix, and its data (ZkAclChangeStore.createChangeNode).
// Literal patterns go to LiteralChanges as "<ENUM_TYPE>:<name>" (the Java
// enum name, ResourceType.toString: "TOPIC:orders", "TRANSACTIONAL_ID:tx");
// prefixed patterns go to ExtendedChanges as ExtendedAclChangeEvent JSON.
func ChangeNotification(r Resource) (parent string, data []byte, err error) {
	if !storableType(r.Type) {
		return "", nil, fmt.Errorf("acl: no change notification for resource type %v", r.Type)
	}
	switch r.Pattern {
	case PatternLiteral:
		return LiteralChanges, []byte(r.Type.String() + ":" + r.Name), nil
	case PatternPrefixed:
		var b bytes.Buffer
		b.WriteString(`{"version":1,"resourceType":`)
		writeJSONString(&b, r.Type.String())
		b.WriteString(`,"name":`)
		writeJSONString(&b, r.Name)
		b.WriteString(`,"patternType":`)
		writeJSONString(&b, PatternTypeName(r.Pattern))
		b.WriteByte('}')
		return ExtendedChanges, b.Bytes(), nil
	default:
		return "", nil, fmt.Errorf("acl: no change notification for pattern type %v", r.Pattern)
	}
}

// ParseChangeNotification reads the data of a change notification found
// under parent (LiteralChanges or ExtendedChanges), as the change stores'
// decode. The literal form splits at the first ':' and reads the type in
// any case, enum or PascalCase ("TOPIC", "Topic": Kafka before 2.0 wrote
// the latter). The extended form is JSON whose version must not exceed 1;
// its pattern type is the exact enum name. Unknown types are errors.
func ParseChangeNotification(parent string, data []byte) (Resource, error) {
	switch parent {
	case LiteralChanges:
		typeName, name, ok := strings.Cut(string(data), ":")
		if !ok {
			return Resource{}, fmt.Errorf("acl: literal ACL change: expected ResourceType:ResourceName but got %s", quoteClip(data))
		}
		t := ParseResourceType(typeName)
		if !storableType(t) {
			return Resource{}, fmt.Errorf("acl: literal ACL change: unknown resource type %q", clip(typeName))
		}
		return Resource{Type: t, Name: name, Pattern: PatternLiteral}, nil
	case ExtendedChanges:
		var version json.RawMessage
		var typeName, name, patternName *string
		err := decodeExactKeys(data, map[string]any{
			"version": &version, "resourceType": &typeName, "name": &name, "patternType": &patternName,
		})
		if err != nil {
			return Resource{}, fmt.Errorf("acl: extended ACL change (%d bytes %s): %w", len(data), quoteClip(data), err)
		}
		// A missing version reads as 0 (Jackson's default for the int
		// field), which Kafka accepts; only newer versions are refused.
		if version != nil {
			v, err := readVersion(version)
			if err == nil && v > znodeVersion {
				err = fmt.Errorf("unsupported version %d", v)
			}
			if err != nil {
				return Resource{}, fmt.Errorf("acl: extended ACL change: %w", err)
			}
		}
		if typeName == nil || name == nil || patternName == nil {
			return Resource{}, fmt.Errorf("acl: extended ACL change: resourceType, name and patternType are required, got %s", quoteClip(data))
		}
		t := ParseResourceType(*typeName)
		if !storableType(t) {
			return Resource{}, fmt.Errorf("acl: extended ACL change: unknown resource type %q", clip(*typeName))
		}
		p := ParsePatternType(*patternName)
		if p != PatternPrefixed {
			// ZkAclStore has no store for any other type.
			return Resource{}, fmt.Errorf("acl: extended ACL change: unsupported pattern type %q", clip(*patternName))
		}
		return Resource{Type: t, Name: *name, Pattern: p}, nil
	default:
		return Resource{}, fmt.Errorf("acl: %q is not an ACL change notification parent", clip(parent))
	}
}

// decodeExactKeys decodes a JSON object, setting the fields named in dst
// by exact (case-sensitive, as Jackson) key and ignoring the others.
func decodeExactKeys(data []byte, dst map[string]any) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return fmt.Errorf("malformed JSON at offset %d", syn.Offset)
		}
		return errors.New("not a JSON object")
	}
	if obj == nil {
		return errors.New("not a JSON object")
	}
	for key, v := range dst {
		raw, ok := obj[key]
		if !ok {
			continue
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("key %q: wrong type", key)
		}
	}
	return nil
}

// readVersion reads a JSON integer version.
func readVersion(raw json.RawMessage) (int, error) {
	if raw == nil {
		return 0, errors.New(`missing "version"`)
	}
	v, err := strconv.Atoi(string(raw))
	if err != nil {
		return 0, fmt.Errorf("version %s is not an integer", clip(string(raw)))
	}
	return v, nil
}

// checkVersion requires version 1, as AclEntry.fromBytes.
func checkVersion(raw json.RawMessage) error {
	v, err := readVersion(raw)
	if err != nil {
		return err
	}
	if v != znodeVersion {
		return fmt.Errorf("unsupported version %d", v)
	}
	return nil
}

// writeJSONString writes s as a JSON string escaped as Jackson does:
// quote, backslash and control characters only (\b \t \n \f \r in short
// form, the others as \u00XX); '/', '<', '>', '&' and non-ASCII text are
// written as they are. Invalid UTF-8 becomes U+FFFD, as when Java decodes it.
func writeJSONString(b *bytes.Buffer, s string) {
	const hex = "0123456789ABCDEF"
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[r>>4])
				b.WriteByte(hex[r&0xf])
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// maxEcho bounds how much of a name or of znode data an error repeats:
// the data comes from ZooKeeper or a client and may be large.
const maxEcho = 64

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	cut := maxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// quoteClip quotes the start of data for an error message.
func quoteClip(data []byte) string {
	return strconv.Quote(clip(string(data)))
}
