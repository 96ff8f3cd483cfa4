// Package acl is Kafka's ACL model as pure code: the bindings (resource
// pattern + access control entry) with Kafka's wire codes, their ZooKeeper
// znode layout and JSON (ZK-mode AclAuthorizer, byte-compatible), the
// filters of DescribeAcls / DeleteAcls, CreateAcls validation, and the
// authorization decision itself over an immutable, indexed snapshot.
//
// It does no I/O: the ZooKeeper store reads and writes the bytes this
// package encodes, and the broker builds a new Authorizer whenever the set
// of bindings changes.
//
// The codes are kmsg's (the same numbers as Kafka's ResourceType,
// PatternType, AclOperation and AclPermissionType enums), so request and
// response fields carry over without conversion.
package acl

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Resource types (Kafka's ResourceType). Any and Unknown only appear in
// filters or as the result of parsing a name this version does not know.
const (
	ResourceUnknown         = kmsg.ACLResourceTypeUnknown
	ResourceAny             = kmsg.ACLResourceTypeAny
	ResourceTopic           = kmsg.ACLResourceTypeTopic
	ResourceGroup           = kmsg.ACLResourceTypeGroup
	ResourceCluster         = kmsg.ACLResourceTypeCluster
	ResourceTransactionalID = kmsg.ACLResourceTypeTransactionalId
	ResourceDelegationToken = kmsg.ACLResourceTypeDelegationToken
	ResourceUser            = kmsg.ACLResourceTypeUser
)

// Pattern types (Kafka's PatternType). Any and Match are filter-only.
const (
	PatternUnknown  = kmsg.ACLResourcePatternTypeUnknown
	PatternAny      = kmsg.ACLResourcePatternTypeAny
	PatternMatch    = kmsg.ACLResourcePatternTypeMatch
	PatternLiteral  = kmsg.ACLResourcePatternTypeLiteral
	PatternPrefixed = kmsg.ACLResourcePatternTypePrefixed
)

// Operations (Kafka's AclOperation). Any is filter-only; All in an ACL
// grants (or denies) every operation.
const (
	OpUnknown         = kmsg.ACLOperationUnknown
	OpAny             = kmsg.ACLOperationAny
	OpAll             = kmsg.ACLOperationAll
	OpRead            = kmsg.ACLOperationRead
	OpWrite           = kmsg.ACLOperationWrite
	OpCreate          = kmsg.ACLOperationCreate
	OpDelete          = kmsg.ACLOperationDelete
	OpAlter           = kmsg.ACLOperationAlter
	OpDescribe        = kmsg.ACLOperationDescribe
	OpClusterAction   = kmsg.ACLOperationClusterAction
	OpDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	OpAlterConfigs    = kmsg.ACLOperationAlterConfigs
	OpIdempotentWrite = kmsg.ACLOperationIdempotentWrite
	OpCreateTokens    = kmsg.ACLOperationCreateTokens
	OpDescribeTokens  = kmsg.ACLOperationDescribeTokens
)

// Permissions (Kafka's AclPermissionType). Any is filter-only.
const (
	PermissionUnknown = kmsg.ACLPermissionTypeUnknown
	PermissionAny     = kmsg.ACLPermissionTypeAny
	PermissionDeny    = kmsg.ACLPermissionTypeDeny
	PermissionAllow   = kmsg.ACLPermissionTypeAllow
)

// Wildcards and fixed names, as Kafka spells them.
const (
	// WildcardResource as the name of a literal pattern matches every
	// resource of its type (ResourcePattern.WILDCARD_RESOURCE).
	WildcardResource = "*"
	// WildcardPrincipal in an entry matches every principal
	// (AclEntry.WildcardPrincipalString); only the User type has one.
	WildcardPrincipal = "User:*"
	// WildcardHost in an entry matches every client address.
	WildcardHost = "*"
	// ClusterName is the one name a Cluster resource has
	// (Resource.CLUSTER_NAME).
	ClusterName = "kafka-cluster"
)

// Entry is one access control entry (Kafka's AccessControlEntry): who
// (principal "Type:name", e.g. "User:alice"), from where (host: a client
// IP address as text, or "*"), may or may not do what.
type Entry struct {
	Principal  string
	Host       string
	Operation  kmsg.ACLOperation
	Permission kmsg.ACLPermissionType
}

// Resource is a resource pattern (Kafka's ResourcePattern): a literal
// name (possibly the wildcard "*") or a name prefix, of one type.
type Resource struct {
	Type    kmsg.ACLResourceType
	Name    string
	Pattern kmsg.ACLResourcePatternType
}

// Binding is one ACL: an entry bound to a resource pattern (Kafka's
// AclBinding).
type Binding struct {
	Resource
	Entry
}

// String formats the entry as Kafka's AccessControlEntry.toString, for
// logs and messages.
func (e Entry) String() string {
	return "(principal=" + e.Principal + ", host=" + e.Host + ", operation=" + e.Operation.String() +
		", permissionType=" + e.Permission.String() + ")"
}

// String formats the pattern as Kafka's ResourcePattern.toString.
func (r Resource) String() string {
	return "ResourcePattern(resourceType=" + r.Type.String() + ", name=" + r.Name +
		", patternType=" + r.Pattern.String() + ")"
}

// String formats the binding as Kafka's AclBinding.toString.
func (b Binding) String() string {
	return "(pattern=" + b.Resource.String() + ", entry=" + b.Entry.String() + ")"
}

// ResourceTypeName is the name Kafka writes for a resource type in
// znode paths and tools (SecurityUtils.resourceTypeName: the enum name in
// PascalCase, "TransactionalId", "DelegationToken").
func ResourceTypeName(t kmsg.ACLResourceType) string {
	switch t {
	case ResourceAny:
		return "Any"
	case ResourceTopic:
		return "Topic"
	case ResourceGroup:
		return "Group"
	case ResourceCluster:
		return "Cluster"
	case ResourceTransactionalID:
		return "TransactionalId"
	case ResourceDelegationToken:
		return "DelegationToken"
	case ResourceUser:
		return "User"
	default:
		return "Unknown"
	}
}

// OperationName is the name Kafka writes for an operation in znode JSON
// (SecurityUtils.operationName: "Read", "IdempotentWrite", ...).
func OperationName(op kmsg.ACLOperation) string {
	switch op {
	case OpAny:
		return "Any"
	case OpAll:
		return "All"
	case OpRead:
		return "Read"
	case OpWrite:
		return "Write"
	case OpCreate:
		return "Create"
	case OpDelete:
		return "Delete"
	case OpAlter:
		return "Alter"
	case OpDescribe:
		return "Describe"
	case OpClusterAction:
		return "ClusterAction"
	case OpDescribeConfigs:
		return "DescribeConfigs"
	case OpAlterConfigs:
		return "AlterConfigs"
	case OpIdempotentWrite:
		return "IdempotentWrite"
	case OpCreateTokens:
		return "CreateTokens"
	case OpDescribeTokens:
		return "DescribeTokens"
	default:
		return "Unknown"
	}
}

// PermissionName is the name Kafka writes for a permission in znode JSON
// (SecurityUtils.permissionTypeName: "Allow", "Deny").
func PermissionName(p kmsg.ACLPermissionType) string {
	switch p {
	case PermissionAny:
		return "Any"
	case PermissionDeny:
		return "Deny"
	case PermissionAllow:
		return "Allow"
	default:
		return "Unknown"
	}
}

// PatternTypeName is PatternType.name(), upper case, as Kafka writes it
// in extended change notifications ("LITERAL", "PREFIXED").
func PatternTypeName(p kmsg.ACLResourcePatternType) string {
	return p.String()
}

// ParseResourceType reads a resource type name as SecurityUtils.resourceType
// does: the PascalCase name, or the same in any case ("topic", "TOPIC");
// anything else is ResourceUnknown. It also accepts the Java enum name
// with underscores ("TRANSACTIONAL_ID", ResourceType.fromString's form),
// which Kafka writes in literal change notifications.
func ParseResourceType(name string) kmsg.ACLResourceType {
	for t := ResourceAny; t <= ResourceUser; t++ {
		if strings.EqualFold(name, ResourceTypeName(t)) || strings.EqualFold(name, t.String()) {
			return t
		}
	}
	return ResourceUnknown
}

// ParseOperation reads an operation name as SecurityUtils.operation does
// (PascalCase name in any case); anything else is OpUnknown.
func ParseOperation(name string) kmsg.ACLOperation {
	for op := OpAny; op <= OpDescribeTokens; op++ {
		if strings.EqualFold(name, OperationName(op)) {
			return op
		}
	}
	return OpUnknown
}

// ParsePermission reads a permission name as SecurityUtils.permissionType
// does (PascalCase name in any case); anything else is PermissionUnknown.
func ParsePermission(name string) kmsg.ACLPermissionType {
	for p := PermissionAny; p <= PermissionAllow; p++ {
		if strings.EqualFold(name, PermissionName(p)) {
			return p
		}
	}
	return PermissionUnknown
}

// ParsePatternType reads a pattern type name as PatternType.fromString:
// the exact enum name ("PREFIXED"); anything else is PatternUnknown.
func ParsePatternType(name string) kmsg.ACLResourcePatternType {
	for p := PatternAny; p <= PatternPrefixed; p++ {
		if name == p.String() {
			return p
		}
	}
	return PatternUnknown
}
