package server

import (
	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kerr"
)

// aclBindings are the ACLs of the broker's current cluster view: every
// binding of /kafka-acl and /kafka-acl-extended, sorted and each once, as
// the controller publishes them (immutable: do not modify). The
// authorizer is built over these, anew whenever the view changes them.
func (b *Broker) aclBindings() []acl.Binding {
	return b.controller.Metadata().ACLs
}

// errSecurityDisabled answers the ACL APIs on a broker without an
// authorizer (authorizer.class.name unset), as Kafka's KafkaApis does:
// there are no ACLs to describe, and created ones would do nothing.
var errSecurityDisabled = &refusal{kerr.SecurityDisabled, "No Authorizer is configured on the broker"}
