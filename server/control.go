package server

import "github.com/kbroker/kbroker/controller"

// controlPlane is what the server needs from the cluster's control plane:
// the current cluster view and the admin operations only the controller
// performs. The embedded single node runs the controller in process
// (*controller.Controller); in a ZooKeeper cluster, a broker that is not the
// controller answers admin operations with NOT_CONTROLLER.
type controlPlane interface {
	// Metadata is the current, immutable cluster snapshot.
	Metadata() *controller.Metadata
	// Subscribe registers fn for every new snapshot, in order.
	Subscribe(fn func(*controller.Metadata))

	CreateTopic(req controller.CreateTopicRequest, validateOnly bool) (*controller.Topic, error)
	DeleteTopic(name string) error
	CreatePartitions(name string, total int32, assignment [][]int32, validateOnly bool) error
	UpdateTopicConfigs(name string, change func(current map[string]string) (map[string]string, error), validateOnly bool) error
	AllocateProducerID() (int64, error)
}

var _ controlPlane = (*controller.Controller)(nil)
