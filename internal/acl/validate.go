package acl

// What CreateAcls refuses, gathered from the places Kafka refuses it: the
// ResourcePattern and AccessControlEntry constructors (filter-only
// values), AclApis.handleCreateAcls (the cluster's name, empty names),
// AclAuthorizer.validateAclBinding (unknown elements, '/' in a name),
// AclEntry (the principal's form) and ZooKeeper's path rules (a name is a
// znode name). Kafka answers some of these with UNKNOWN_SERVER_ERROR or
// by failing the whole request; every one is a client error, so each is
// an *InvalidRequestError for INVALID_REQUEST on that binding alone.

import "fmt"

// InvalidRequestError is input Kafka refuses as invalid. Message is the
// text for the response's error message, Kafka's where Kafka has one.
type InvalidRequestError struct {
	Message string
}

func (e *InvalidRequestError) Error() string { return "acl: " + e.Message }

func invalidf(format string, args ...any) error {
	return &InvalidRequestError{Message: fmt.Sprintf(format, args...)}
}

// ValidateBinding checks a binding a CreateAcls request asks for. The
// error, if any, is an *InvalidRequestError.
func ValidateBinding(b Binding) error {
	switch {
	case b.Type == ResourceAny:
		return invalidf("resourceType must not be ANY")
	case b.Pattern == PatternAny || b.Pattern == PatternMatch:
		return invalidf("patternType must not be %v", b.Pattern)
	case b.Operation == OpAny:
		return invalidf("operation must not be ANY")
	case b.Permission == PermissionAny:
		return invalidf("permissionType must not be ANY")
	case !concreteType(b.Type) || (b.Pattern != PatternLiteral && b.Pattern != PatternPrefixed) ||
		!concreteOp(b.Operation) || (b.Permission != PermissionAllow && b.Permission != PermissionDeny):
		return invalidf("ACL binding contains unknown elements")
	case b.Type == ResourceCluster && b.Name != ClusterName:
		return invalidf("The only valid name for the CLUSTER resource is %s", ClusterName)
	}
	if err := ValidateName(b.Name); err != nil {
		return err
	}
	if err := ValidatePrincipal(b.Principal); err != nil {
		return err
	}
	return nil
}
