package server

import (
	"context"
	"errors"
	"strings"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeAcls: v0-3
//
// Behaviour:
// * Answered from this broker's cluster view (the controller publishes
//   every ACL to every broker), so any broker answers, with the bindings
//   the request's filter matches (acl.Filter: Kafka's AclBindingFilter,
//   MATCH and ANY pattern types included), grouped by resource pattern in
//   the view's order.
// * A filter with an UNKNOWN element gets INVALID_REQUEST "Filters contain
//   UNKNOWN elements" (Kafka fails to parse it and closes the connection).
// * Authorization (AclApis.handleDescribeAcls): Describe on the cluster,
//   else CLUSTER_AUTHORIZATION_FAILED and no ACLs.
// * ACLs are always kept, whether or not anything enforces them (Kafka
//   without an authorizer answers SECURITY_DISABLED instead).
//
// Version notes:
// * v1: adds the resource pattern type filter (v0: LITERAL) and the
//   pattern type of each resource in the response
// * v2: flexible
// * v3: no change

func init() {
	registerAPI(kmsg.DescribeACLs.Int16(), 0, 3, handleDescribeACLs)
}

func handleDescribeACLs(_ context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if b.authz == nil {
		resp.ErrorCode, resp.ErrorMessage = errorCodeAndMessage(errSecurityDisabled)
		return resp, nil
	}
	if !b.authorizeCluster(rc, acl.OpDescribe) {
		resp.ErrorCode, resp.ErrorMessage = errorCodeAndMessage(errClusterRefused)
		return resp, nil
	}
	f := acl.Filter{
		ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType,
	}
	if req.Version == 0 {
		f.PatternType = acl.PatternLiteral
	}
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCodeAndMessage(invalidACLRequest(err))
		return resp, nil
	}
	resp.Resources = describeACLResources(acl.Matching(b.aclBindings(), f))
	return resp, nil
}

// describeACLResources groups sorted bindings by resource pattern
// (DescribeAclsResponse.aclsResources).
func describeACLResources(bindings []acl.Binding) []kmsg.DescribeACLsResponseResource {
	var out []kmsg.DescribeACLsResponseResource
	for _, bd := range bindings {
		if n := len(out); n == 0 || out[n-1].ResourceType != bd.Type || out[n-1].ResourceName != bd.Name || out[n-1].ResourcePatternType != bd.Pattern {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = bd.Type, bd.Name, bd.Pattern
			out = append(out, r)
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host, e.Operation, e.PermissionType = bd.Principal, bd.Host, bd.Operation, bd.Permission
		last := &out[len(out)-1]
		last.ACLs = append(last.ACLs, e)
	}
	return out
}

// aclRequestError is INVALID_REQUEST with acl's message as the response's
// error message.
type aclRequestError struct{ msg string }

func (e *aclRequestError) Error() string { return e.msg }
func (e *aclRequestError) Unwrap() error { return kerr.InvalidRequest }

// invalidACLRequest turns a refusal of internal/acl into INVALID_REQUEST.
func invalidACLRequest(err error) error {
	var ie *acl.InvalidRequestError
	if errors.As(err, &ie) {
		return &aclRequestError{ie.Message}
	}
	return &aclRequestError{strings.TrimPrefix(err.Error(), "acl: ")}
}
