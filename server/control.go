package server

import (
	"context"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/internal/acl"
)

// controlPlane is everything the server needs from the cluster's control
// plane: the current cluster view, the admin operations only the controller
// performs, and the inter-broker operations (views, ISR changes, shutdown,
// elections). The embedded single node and a ZooKeeper cluster run the same
// controller core (*controller.Cluster); on a broker that is not the
// controller the operations answer NOT_CONTROLLER.
type controlPlane interface {
	// Metadata is the current, immutable cluster snapshot.
	Metadata() *controller.Metadata
	// Subscribe registers fn for every new snapshot, in order.
	Subscribe(fn func(*controller.Metadata))
	// Start joins the cluster (once listening); Close leaves it.
	Start(ctx context.Context) error
	Close()
	IsController() bool
	// UncleanElections counts this broker's unclean elections as
	// controller.
	UncleanElectionCount() int64

	CreateTopic(req controller.CreateTopicRequest, validateOnly bool) (*controller.Topic, error)
	DeleteTopic(name string) error
	CreatePartitions(name string, total int32, assignment [][]int32, validateOnly bool) error
	UpdateTopicConfigs(name string, change func(current map[string]string) (map[string]string, error), validateOnly bool) error
	UpdateBrokerConfigs(entity string, change func(current map[string]string) (map[string]string, error), validateOnly bool) error
	AlterScramCredentials(upsertions []controller.ScramUpsertion, deletions []controller.ScramDeletion) ([]controller.ScramResult, error)
	CreateACLs(bindings []acl.Binding) []error
	DeleteACLs(filters []acl.Filter) ([]controller.ACLDeletion, error)
	AlterClientQuotas(alts []controller.QuotaAlteration, validateOnly bool) ([]error, error)
	AllocateProducerID() (int64, error)

	ApplyUpdate(controllerEpoch int32, md *controller.Metadata) error
	AlterISRs(leader int32, changes []controller.ISRChange) ([]controller.ISRResult, error)
	ControlledShutdown(id int32) (int, error)
	ElectLeaders(preferred bool, partitions []controller.TopicPartition) ([]controller.ElectionResult, error)
	AlterReassignments(reqs []controller.ReassignRequest) ([]error, error)
	ListReassignments(partitions []controller.TopicPartition) ([]controller.Reassignment, error)
}

var _ controlPlane = (*controller.Cluster)(nil)
