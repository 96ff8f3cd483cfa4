package server

// Authorization: with authorizer.class.name set to Kafka's ACL authorizer,
// every handler asks, next to the code it guards, what Kafka 3.9's
// KafkaApis asks (internal/authz lists it per API), and answers a refusal
// with Kafka's error code. This file is the glue: the authorizer over the
// current cluster view's ACLs, and the questions handlers ask of it.
//
// The authorizer (internal/acl) is an immutable snapshot. It is rebuilt
// when a new view brings a different set of ACLs (a view that only moves
// leaders costs one comparison of the binding lists), and a check is an
// atomic pointer load plus a few map lookups. Without an authorizer every
// check passes without looking at anything.
//
// Requests a broker forwards to the controller (CreateTopics, ACL and SCRAM
// changes, ...) are authorized here, on the broker the client is connected
// to, against the client's principal; the forwarded copy then travels as
// the inter-broker principal, which must be a super user (as every broker
// of a Kafka cluster with an authorizer must be, for its own requests).

import (
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kbroker/kbroker/config"
	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authorization is the broker's ACL authorizer: nil on a broker without
// one.
type authorization struct {
	cfg    acl.Config
	logger *slog.Logger
	// current is the authorizer checks use; never nil.
	current atomic.Pointer[acl.Authorizer]

	// mu serialises rebuilds and guards built, the bindings current was
	// built over.
	mu    sync.Mutex
	built []acl.Binding
}

// newAuthorization returns the authorizer cfg asks for (nil for none),
// allowing only super users until the first ACLs arrive.
func newAuthorization(cfg config.Config, logger *slog.Logger) *authorization {
	if !cfg.AuthorizerEnabled() {
		return nil
	}
	a := &authorization{
		cfg:    acl.Config{SuperUsers: cfg.SuperUsers, AllowEveryoneIfNoACLFound: cfg.AllowEveryoneIfNoACLFound},
		logger: logger,
	}
	a.current.Store(acl.New(nil, a.cfg))
	return a
}

// update makes bindings the ACLs checks see, rebuilding the authorizer
// only when they differ from the last set. It reports whether it rebuilt.
func (a *authorization) update(bindings []acl.Binding) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if slices.Equal(a.built, bindings) {
		return false // the first authorizer was built over none
	}
	a.current.Store(acl.New(bindings, a.cfg))
	a.built = bindings
	a.logger.Info("ACLs changed: authorizer rebuilt", "acls", len(bindings))
	return true
}

// watchACLs keeps the authorizer in step with the cluster view, from the
// current one on. Call it once, before the broker serves.
func (b *Broker) watchACLs() {
	if b.authz == nil {
		return
	}
	b.controller.Subscribe(func(*controller.Metadata) { b.authz.update(b.aclBindings()) })
	b.authz.update(b.aclBindings())
}

// authorizer is the authorizer checks use now, nil when there is none.
func (b *Broker) authorizer() *acl.Authorizer {
	if b.authz == nil {
		return nil
	}
	return b.authz.current.Load()
}

// authorize tells whether the request's principal, from its client's
// address, may perform op on the resource of type rt literally named name
// (AuthHelper.authorize). Always true without an authorizer.
func (b *Broker) authorize(rc *requestContext, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	a := b.authorizer()
	if a == nil {
		return true
	}
	if rc == nil {
		return false // no principal: only reached by handler tests
	}
	ok := a.Authorize(rc.principal, rc.clientIP(), op, rt, name)
	if !ok {
		b.logger.Debug("authorization denied", "principal", rc.principal, "host", rc.clientIP(),
			"operation", acl.OperationName(op), "resource_type", acl.ResourceTypeName(rt), "resource", name)
	}
	return ok
}

// authorizeCluster tells whether the request's principal may perform op on
// the cluster (AuthHelper.authorizeClusterOperation without the throw).
func (b *Broker) authorizeCluster(rc *requestContext, op kmsg.ACLOperation) bool {
	return b.authorize(rc, op, acl.ResourceCluster, acl.ClusterName)
}

// authorizeAnyResource tells whether the request's principal may perform op
// on at least one resource of type rt (AuthHelper.authorizeByResourceType).
func (b *Broker) authorizeAnyResource(rc *requestContext, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	a := b.authorizer()
	if a == nil {
		return true
	}
	if rc == nil {
		return false
	}
	return a.AuthorizeByResourceType(rc.principal, rc.clientIP(), op, rt)
}

// authorizedOperations is the bit field (1 << operation code) of the
// operations the request's principal may perform on the resource, among
// those Kafka supports for its type (AuthHelper.authorizedOperations).
// Without an authorizer: all of them.
func (b *Broker) authorizedOperations(rc *requestContext, rt kmsg.ACLResourceType, name string) int32 {
	all := b.authorizer() == nil
	var bits int32
	for _, op := range supportedOperations(rt) {
		if all || b.authorize(rc, op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// supportedOperations are the operations Kafka defines on a resource type
// (AclEntry.supportedOperations), for authorized-operations fields.
func supportedOperations(rt kmsg.ACLResourceType) []kmsg.ACLOperation {
	switch rt {
	case acl.ResourceTopic:
		return []kmsg.ACLOperation{acl.OpRead, acl.OpWrite, acl.OpCreate, acl.OpDescribe, acl.OpDelete,
			acl.OpAlter, acl.OpDescribeConfigs, acl.OpAlterConfigs}
	case acl.ResourceGroup:
		return []kmsg.ACLOperation{acl.OpRead, acl.OpDescribe, acl.OpDelete}
	case acl.ResourceCluster:
		return []kmsg.ACLOperation{acl.OpCreate, acl.OpClusterAction, acl.OpDescribeConfigs, acl.OpAlterConfigs,
			acl.OpIdempotentWrite, acl.OpAlter, acl.OpDescribe}
	case acl.ResourceTransactionalID:
		return []kmsg.ACLOperation{acl.OpDescribe, acl.OpWrite}
	case acl.ResourceDelegationToken:
		return []kmsg.ACLOperation{acl.OpDescribe}
	case acl.ResourceUser:
		return []kmsg.ACLOperation{acl.OpCreateTokens, acl.OpDescribeTokens}
	default:
		return nil
	}
}

// unrequestedOperations is the value of an authorized-operations field
// nobody asked for (the schema's default, Integer.MIN_VALUE).
const unrequestedOperations int32 = -2147483648

// clientIP is the request's client address as ACL hosts name it, computed
// once per request.
func (rc *requestContext) clientIP() string {
	if rc.host == "" {
		rc.host = javaHostAddress(rc.remote)
	}
	return rc.host
}

// javaHostAddress is the IP address of a client "host:port" as Kafka
// compares it with an ACL's host: Java's InetAddress.getHostAddress. An
// IPv4 address (also one mapped into IPv6) is dotted decimal; an IPv6
// address has all eight groups in lower-case hex without leading zeros
// and no "::" shortening ("0:0:0:0:0:0:0:1"), then "%zone" when it has
// one. What does not parse as an address is returned as given, so it can
// only match a host "*".
func javaHostAddress(remote string) string {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if addr.Is4() || addr.Is4In6() {
		return addr.Unmap().String()
	}
	raw := addr.As16()
	var sb strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteString(strconv.FormatUint(uint64(raw[i])<<8|uint64(raw[i+1]), 16))
	}
	if z := addr.Zone(); z != "" {
		sb.WriteString("%" + z)
	}
	return sb.String()
}

// nameChecks asks one question (an operation on resources of one type) of
// many names in a request, once per distinct name, as Kafka's
// filterByAuthorized does.
type nameChecks struct {
	b       *Broker
	rc      *requestContext
	op      kmsg.ACLOperation
	rt      kmsg.ACLResourceType
	answers map[string]bool // nil without an authorizer: everything passes
}

// checksFor prepares asking whether the request's principal may perform op
// on resources of type rt.
func (b *Broker) checksFor(rc *requestContext, op kmsg.ACLOperation, rt kmsg.ACLResourceType) *nameChecks {
	n := &nameChecks{b: b, rc: rc, op: op, rt: rt}
	if b.authorizer() != nil {
		n.answers = map[string]bool{}
	}
	return n
}

// allowed tells whether the operation is allowed on name.
func (n *nameChecks) allowed(name string) bool {
	if n.answers == nil {
		return true
	}
	ok, asked := n.answers[name]
	if !asked {
		ok = n.b.authorize(n.rc, n.op, n.rt, name)
		n.answers[name] = ok
	}
	return ok
}

// splitByName splits items by whether allowed says yes to their name,
// keeping their order. Without any refusal, allowed is items itself.
func splitByName[T any](items []T, name func(T) string, allowed func(string) bool) (yes, no []T) {
	for i, it := range items {
		if allowed(name(it)) {
			if no == nil {
				continue // still a prefix of items
			}
			yes = append(yes, it)
			continue
		}
		if no == nil {
			yes = append([]T(nil), items[:i]...)
		}
		no = append(no, it)
	}
	if no == nil {
		return items, nil
	}
	return yes, no
}

// refusal is an authorization failure answered with Kafka's code and
// Kafka's exact message, where the response has a message field.
type refusal struct {
	code *kerr.Error
	msg  string
}

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return e.code }

// errClusterRefused answers a request that needs an operation on the
// cluster the principal may not perform (Kafka's
// ClusterAuthorizationException).
var errClusterRefused = &refusal{kerr.ClusterAuthorizationFailed, "Cluster authorization failed."}

// configsRefusal is the refusal of op (DescribeConfigs or AlterConfigs) on
// a config resource, nil when it is allowed: a topic's configs need op on
// the topic, a broker's (or broker logger's) op on the cluster
// (ConfigHelper.handleDescribeConfigsRequest, KafkaApis'
// processLegacyAlterConfigsRequest and processIncrementalAlterConfigsRequest).
// Other resource types are not asked about: they are refused as invalid
// whoever asks.
func (b *Broker) configsRefusal(rc *requestContext, op kmsg.ACLOperation, rtype kmsg.ConfigResourceType, name string) error {
	switch rtype {
	case kmsg.ConfigResourceTypeTopic:
		if !b.authorize(rc, op, acl.ResourceTopic, name) {
			return &refusal{kerr.TopicAuthorizationFailed, "Topic authorization failed."}
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !b.authorizeCluster(rc, op) {
			return errClusterRefused
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !b.authorize(rc, op, acl.ResourceGroup, name) {
			return &refusal{kerr.GroupAuthorizationFailed, "Group authorization failed."}
		}
	}
	return nil
}
