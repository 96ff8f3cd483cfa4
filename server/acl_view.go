package server

import "github.com/kbroker/kbroker/internal/acl"

// aclBindings are the ACLs of the broker's current cluster view: every
// binding of /kafka-acl and /kafka-acl-extended, sorted and each once, as
// the controller publishes them (immutable: do not modify). The
// authorizer is built over these, anew whenever the view changes them.
func (b *Broker) aclBindings() []acl.Binding {
	return b.controller.Metadata().ACLs
}
