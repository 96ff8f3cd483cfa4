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

// CreateAcls: v0-3
//
// Behaviour:
// * The controller validates and applies the request (controller
//   CreateACLs: acl.ValidateBinding's refusals as INVALID_REQUEST on that
//   binding alone; an ACL already present is no error). Creations on the
//   same resource pattern are written together, in ZooKeeper mode's one
//   znode per pattern with Kafka's change notification, and succeed or
//   fail together. One result per creation, in order.
// * On another broker the request is forwarded to the controller over the
//   broker's controller connection, and answered once this broker's own
//   view shows every created ACL (bounded by forwardTimeout, then answered
//   anyway: the change is made, the view follows).
// * No controller reachable: NOT_CONTROLLER for every creation.
// * Authorization (AclApis.handleCreateAcls), on the broker the client
//   talks to, before forwarding: Alter on the cluster, else every creation
//   gets CLUSTER_AUTHORIZATION_FAILED.
// * ACLs are always stored, whether or not anything enforces them (Kafka
//   without an authorizer answers SECURITY_DISABLED instead).
//
// Version notes:
// * v1: adds the resource pattern type (v0: LITERAL)
// * v2: flexible
// * v3: no change

func init() {
	registerAPI(kmsg.CreateACLs.Int16(), 0, 3, handleCreateACLs)
}

func handleCreateACLs(ctx context.Context, b *Broker, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	refused := errClusterRefused
	if b.authz == nil {
		refused = errSecurityDisabled
	}
	if b.authz == nil || !b.authorizeCluster(rc, acl.OpAlter) {
		for range req.Creations {
			r := kmsg.NewCreateACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = errorCodeAndMessage(refused)
			resp.Results = append(resp.Results, r)
		}
		return resp, nil
	}
	bindings := aclCreations(req)
	errs := b.controller.CreateACLs(bindings)
	if len(errs) > 0 && !slices.ContainsFunc(errs, func(err error) bool { return !errors.Is(err, kerr.NotController) }) {
		resp.Results = b.forwardCreateACLs(ctx, req, bindings)
		return resp, nil
	}
	for _, err := range errs {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = errorCodeAndMessage(err)
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// aclCreations are the request's bindings; v0 carries no pattern type and
// means LITERAL.
func aclCreations(req *kmsg.CreateACLsRequest) []acl.Binding {
	out := make([]acl.Binding, 0, len(req.Creations))
	for _, c := range req.Creations {
		pattern := c.ResourcePatternType
		if req.Version == 0 {
			pattern = acl.PatternLiteral
		}
		out = append(out, acl.Binding{
			Resource: acl.Resource{Type: c.ResourceType, Name: c.ResourceName, Pattern: pattern},
			Entry:    acl.Entry{Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType},
		})
	}
	return out
}

// createACLsResults fails every creation with err.
func createACLsResults(n int, err error) []kmsg.CreateACLsResponseResult {
	out := make([]kmsg.CreateACLsResponseResult, n)
	for i := range out {
		out[i] = kmsg.NewCreateACLsResponseResult()
		out[i].ErrorCode, out[i].ErrorMessage = errorCodeAndMessage(err)
	}
	return out
}

// forwardCreateACLs sends the creations to the controller (at v3, with
// the pattern types spelled out) and waits (bounded) until this broker's
// view shows the ones it applied.
func (b *Broker) forwardCreateACLs(ctx context.Context, req *kmsg.CreateACLsRequest, bindings []acl.Binding) []kmsg.CreateACLsResponseResult {
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	fwd := kmsg.NewPtrCreateACLsRequest()
	fwd.Version = 3
	fwd.Creations = slices.Clone(req.Creations)
	for i := range fwd.Creations {
		fwd.Creations[i].ResourcePatternType = bindings[i].Pattern
	}
	kresp, ctrl, err := b.forwardToController(ctx, "creating ACLs", fwd)
	if err != nil {
		return createACLsResults(len(bindings), err)
	}
	results := kresp.(*kmsg.CreateACLsResponse).Results
	if len(results) != len(bindings) {
		return createACLsResults(len(bindings), fmt.Errorf("%w: controller %d answered %d results to %d creations", kerr.UnknownServerError, ctrl, len(results), len(bindings)))
	}
	var want []acl.Binding
	for i, r := range results {
		if r.ErrorCode == 0 {
			want = append(want, bindings[i])
		}
	}
	b.awaitView(ctx, ctrl, "ACLs created", func(md *controller.Metadata) bool {
		view := md.ACLs
		for _, w := range want {
			if !slices.Contains(view, w) {
				return false
			}
		}
		return true
	})
	return results
}
