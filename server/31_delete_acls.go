package server

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteAcls: v0-3
//
// Behaviour:
// * The controller applies the request (controller DeleteACLs, as Kafka's
//   AclAuthorizer.deleteAcls): one result per filter, in order, listing
//   the ACLs it matched and removed, each with its own error code (set when
//   its resource pattern's write failed: the ACL is still there). An ACL
//   several filters match is listed under the first. A filter with an
//   UNKNOWN element gets INVALID_REQUEST "Filters contain UNKNOWN elements"
//   (Kafka fails to parse it and closes the connection).
// * On another broker the request is forwarded to the controller over the
//   broker's controller connection, and answered once this broker's own
//   view no longer shows the removed ACLs (bounded by forwardTimeout, then
//   answered anyway).
// * No controller reachable: NOT_CONTROLLER for every filter.
// * Authorization (AclApis.handleDeleteAcls), on the broker the client
//   talks to, before forwarding: Alter on the cluster, else every filter
//   gets CLUSTER_AUTHORIZATION_FAILED and nothing is removed.
//
// Version notes:
// * v1: adds the resource pattern type filter (v0: LITERAL) and the
//   pattern type of each matching ACL in the response
// * v2: flexible
// * v3: no change

func init() {
	registerAPI(kmsg.DeleteACLs.Int16(), 0, 3, handleDeleteACLs)
}

func handleDeleteACLs(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	if b.authz == nil {
		resp.Results = deleteACLsResults(len(req.Filters), errSecurityDisabled)
		return resp, nil
	}
	if !b.authorizeCluster(rc, acl.OpAlter) {
		resp.Results = deleteACLsResults(len(req.Filters), errClusterRefused)
		return resp, nil
	}
	filters := aclDeleteFilters(req)
	deletions, err := b.controller.DeleteACLs(filters)
	switch {
	case errors.Is(err, kerr.NotController):
		resp.Results = b.forwardDeleteACLs(ctx, req, filters)
	case err != nil:
		resp.Results = deleteACLsResults(len(filters), err)
	default:
		resp.Results = make([]kmsg.DeleteACLsResponseResult, 0, len(deletions))
		for _, d := range deletions {
			resp.Results = append(resp.Results, deleteACLsResult(d))
		}
	}
	return resp, nil
}

// aclDeleteFilters are the request's filters; v0 carries no pattern type
// and means LITERAL.
func aclDeleteFilters(req *kmsg.DeleteACLsRequest) []acl.Filter {
	out := make([]acl.Filter, 0, len(req.Filters))
	for _, f := range req.Filters {
		pattern := f.ResourcePatternType
		if req.Version == 0 {
			pattern = acl.PatternLiteral
		}
		out = append(out, acl.Filter{
			ResourceType: f.ResourceType, ResourceName: f.ResourceName, PatternType: pattern,
			Principal: f.Principal, Host: f.Host, Operation: f.Operation, Permission: f.PermissionType,
		})
	}
	return out
}

func deleteACLsResult(d controller.ACLDeletion) kmsg.DeleteACLsResponseResult {
	r := kmsg.NewDeleteACLsResponseResult()
	if d.Err != nil {
		r.ErrorCode, r.ErrorMessage = errorCodeAndMessage(d.Err)
		return r
	}
	for _, m := range d.Deleted {
		ma := kmsg.NewDeleteACLsResponseResultMatchingACL()
		ma.ErrorCode, ma.ErrorMessage = errorCodeAndMessage(m.Err)
		ma.ResourceType, ma.ResourceName, ma.ResourcePatternType = m.Binding.Type, m.Binding.Name, m.Binding.Pattern
		ma.Principal, ma.Host = m.Binding.Principal, m.Binding.Host
		ma.Operation, ma.PermissionType = m.Binding.Operation, m.Binding.Permission
		r.MatchingACLs = append(r.MatchingACLs, ma)
	}
	return r
}

// deleteACLsResults fails every filter with err.
func deleteACLsResults(n int, err error) []kmsg.DeleteACLsResponseResult {
	out := make([]kmsg.DeleteACLsResponseResult, n)
	for i := range out {
		out[i] = kmsg.NewDeleteACLsResponseResult()
		out[i].ErrorCode, out[i].ErrorMessage = errorCodeAndMessage(err)
	}
	return out
}

// forwardDeleteACLs sends the filters to the controller (at v3, with the
// pattern types spelled out) and waits (bounded) until this broker's view
// no longer shows the ACLs it removed.
func (b *Broker) forwardDeleteACLs(ctx context.Context, req *kmsg.DeleteACLsRequest, filters []acl.Filter) []kmsg.DeleteACLsResponseResult {
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	fwd := kmsg.NewPtrDeleteACLsRequest()
	fwd.Version = 3
	fwd.Filters = slices.Clone(req.Filters)
	for i := range fwd.Filters {
		fwd.Filters[i].ResourcePatternType = filters[i].PatternType
	}
	kresp, ctrl, err := b.forwardToController(ctx, "deleting ACLs", fwd)
	if err != nil {
		return deleteACLsResults(len(filters), err)
	}
	results := kresp.(*kmsg.DeleteACLsResponse).Results
	if len(results) != len(filters) {
		return deleteACLsResults(len(filters), fmt.Errorf("%w: controller %d answered %d results to %d filters", kerr.UnknownServerError, ctrl, len(results), len(filters)))
	}
	var gone []acl.Binding
	for _, r := range results {
		for _, m := range r.MatchingACLs {
			if r.ErrorCode == 0 && m.ErrorCode == 0 {
				gone = append(gone, acl.Binding{
					Resource: acl.Resource{Type: m.ResourceType, Name: m.ResourceName, Pattern: m.ResourcePatternType},
					Entry:    acl.Entry{Principal: m.Principal, Host: m.Host, Operation: m.Operation, Permission: m.PermissionType},
				})
			}
		}
	}
	b.awaitView(ctx, ctrl, "ACLs deleted", func(md *controller.Metadata) bool {
		for _, g := range gone {
			if slices.Contains(md.ACLs, g) {
				return false
			}
		}
		return true
	})
	return results
}
