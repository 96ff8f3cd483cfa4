package controller

import (
	"context"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/kbroker/kbroker/internal/acl"
)

// metadataStore is where the controller core keeps the cluster state:
// ZooKeeper (*zk.Store, Kafka's znode layout) in a cluster, one local file
// (localStore) for the embedded single node, so both run the same decisions.
// Records are the zk package's types, which mirror Kafka's znodes. Every
// write names the version of the controller epoch its controller won with
// and fails with zk.ErrControllerMoved once another controller was elected;
// partition states are written conditionally on their version (Kafka's
// partition epoch).
type metadataStore interface {
	ClusterID(ctx context.Context, proposed string) (string, error)
	Brokers(ctx context.Context) ([]zk.BrokerInfo, error)
	// WatchBrokers delivers the live broker ids now and after every
	// change, until ctx ends.
	WatchBrokers(ctx context.Context) (<-chan []int32, error)

	Topics(ctx context.Context) ([]string, error)
	TopicAssignment(ctx context.Context, topic string) (zk.TopicAssignment, error)
	PartitionStates(ctx context.Context, topic string) (map[int32]zk.PartitionState, error)
	PartitionState(ctx context.Context, topic string, partition int32) (zk.PartitionState, error)
	TopicConfig(ctx context.Context, topic string) (map[string]string, error)
	// ReadTopics reads the topics' assignments, configs and partition
	// states at once (a new controller's load); a topic's own failure
	// (deleted meanwhile, a damaged znode) is in its TopicRead.
	ReadTopics(ctx context.Context, names []string) (map[string]zk.TopicRead, error)
	DeletedTopics(ctx context.Context) ([]zk.DeletedTopic, error)

	CreateTopic(ctx context.Context, epochZkVersion int32, t zk.NewTopic) error
	CreatePartitionStates(ctx context.Context, epochZkVersion int32, topic string, states map[int32]zk.PartitionState) error
	SetTopicAssignment(ctx context.Context, epochZkVersion int32, topic string, a zk.TopicAssignment) error
	SetTopicConfig(ctx context.Context, epochZkVersion int32, topic string, configs map[string]string) error
	SetPartitionStates(ctx context.Context, epochZkVersion int32, updates ...zk.PartitionUpdate) ([]zk.PartitionUpdateResult, error)
	DeleteTopic(ctx context.Context, epochZkVersion int32, topic string, tombstone *zk.DeletedTopic) error
	SetDeletedTopic(ctx context.Context, epochZkVersion int32, d zk.DeletedTopic) error
	AllocateProducerIDBlock(ctx context.Context, brokerID int32) (zk.ProducerIDBlock, error)

	// User configs (/config/users/<user>): SCRAM credentials and quotas.
	// Users lists the users with a config; UserConfig reads one with the
	// version SetUserConfig must name (-1: absent), so a read-modify-write
	// keeps what another tool wrote meanwhile (ErrVersionConflict: read
	// again). SetUserConfig also writes Kafka's change notification.
	Users(ctx context.Context) ([]string, error)
	UserConfig(ctx context.Context, user string) (map[string]string, int32, error)
	SetUserConfig(ctx context.Context, epochZkVersion int32, user string, configs map[string]string, version int32) error
	// WatchConfigChanges delivers the pending config change notifications
	// (/config/changes) now and after every change, until ctx ends: how
	// the controller learns of changes made by Kafka's own tools.
	// ConfigChange reads one; DeleteConfigChanges purges old ones.
	WatchConfigChanges(ctx context.Context) (<-chan []string, error)
	ConfigChange(ctx context.Context, name string) (zk.ConfigChange, error)
	DeleteConfigChanges(ctx context.Context, epochZkVersion int32, names []string) error

	// Client quota entities (quotas.go): client ids (/config/clients),
	// a user's client ids (/config/users/<user>/clients), and any
	// entity's config (a user's is UserConfig's) with the version
	// SetEntityConfig must name, which also writes the change
	// notification and removes znodes an empty config leaves unused.
	Clients(ctx context.Context) ([]string, error)
	UserClients(ctx context.Context, user string) ([]string, error)
	EntityConfig(ctx context.Context, e zk.Entity) (map[string]string, int32, error)
	SetEntityConfig(ctx context.Context, epochZkVersion int32, e zk.Entity, configs map[string]string, version int32) error
	// BrokerConfigEntities lists the broker ids (and zk.DefaultEntity)
	// with dynamic broker configs; BrokerConfig reads one with the
	// version SetBrokerConfig must name (-1: absent); SetBrokerConfig
	// also writes the change notification (brokerconfigs.go).
	BrokerConfigEntities(ctx context.Context) ([]string, error)
	BrokerConfig(ctx context.Context, entity string) (map[string]string, int32, error)
	SetBrokerConfig(ctx context.Context, epochZkVersion int32, entity string, configs map[string]string, version int32) error

	// ACLs (/kafka-acl/<Type>/<name>, /kafka-acl-extended/prefixed/...):
	// one record per resource pattern. ACLResources lists the patterns
	// with ACLs; ResourceACLs reads one with the version SetResourceACLs
	// must name (-1: absent; ErrVersionConflict: read again), which also
	// writes the change notification of the pattern's store and deletes
	// the record when no entries are left.
	ACLResources(ctx context.Context) ([]acl.Resource, error)
	ResourceACLs(ctx context.Context, r acl.Resource) ([]acl.Entry, int32, error)
	SetResourceACLs(ctx context.Context, epochZkVersion int32, r acl.Resource, entries []acl.Entry, version int32) error
	// WatchACLChanges delivers the pending ACL change notifications of
	// both stores (their paths) now and after every change, until ctx
	// ends: how the controller learns of ACLs written by kafka-acls.sh.
	// ACLChange reads one; DeleteACLChanges purges old ones.
	WatchACLChanges(ctx context.Context) (<-chan []string, error)
	ACLChange(ctx context.Context, path string) (zk.ACLChange, error)
	DeleteACLChanges(ctx context.Context, epochZkVersion int32, paths []string) error

	// The cluster's event history (events.go, zk/events.go): AppendEvents
	// writes events (fenced) and returns them with their sequences;
	// Events reads the newest limit above a sequence; TrimEvents keeps
	// the newest keep and returns how many are left.
	AppendEvents(ctx context.Context, epochZkVersion int32, events []zk.ClusterEvent) ([]zk.ClusterEvent, error)
	// AppendBrokerEvent records what a broker observed itself (unfenced).
	AppendBrokerEvent(ctx context.Context, e zk.ClusterEvent) (zk.ClusterEvent, error)
	Events(ctx context.Context, after int64, limit int) ([]zk.ClusterEvent, error)
	TrimEvents(ctx context.Context, epochZkVersion int32, keep int) (int, error)
}

// membership is the part of ZooKeeper only a cluster has: the broker's own
// registration, the controller election and the session.
type membership interface {
	RegisterBroker(ctx context.Context, b zk.BrokerInfo) (int64, error)
	WatchController(ctx context.Context) (<-chan int32, error)
	ElectController(ctx context.Context, brokerID int32) (won bool, epoch, epochZkVersion int32, err error)
	ResignController(ctx context.Context, epochZkVersion int32) error
	SessionExpired() <-chan struct{}
	Reconnect(ctx context.Context) (int64, error)
	// WatchDeletedTopicIDs follows /kbroker/deleted_topics (see
	// Cluster.followDeletions).
	WatchDeletedTopicIDs(ctx context.Context) (<-chan []zk.TopicID, error)
	// WatchEvents follows the newest event's sequence (see
	// Cluster.followEvents).
	WatchEvents(ctx context.Context) (<-chan int64, error)
	Close()
}

var (
	_ metadataStore = (*zk.Store)(nil)
	_ membership    = (*zk.Store)(nil)
	_ metadataStore = (*localStore)(nil)
)
