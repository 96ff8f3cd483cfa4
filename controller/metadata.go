// Package controller makes every cluster decision: topic creation and
// assignment, leaders and leader epochs, ISR changes, topic configs and
// producer id blocks. It runs on a Store: a local file for the embedded
// single-node mode; ZooKeeper for clusters.
package controller

import (
	"bytes"
	"maps"
	"slices"

	"github.com/kbroker/kbroker/controller/zk"
	"github.com/kbroker/kbroker/internal/acl"
)

// Endpoint is one advertised listener of a broker (Kafka's EndPoint).
type Endpoint = zk.Endpoint

// BrokerInfo is one live broker as the cluster sees it.
type BrokerInfo struct {
	ID int32 `json:"id"`
	// Host and Port are the address other brokers connect to: the
	// inter-broker listener's endpoint, which a broker registers first
	// among its Endpoints (every broker of a cluster names the same
	// inter.broker.listener.name, as in Kafka).
	Host string `json:"host"`
	Port int32  `json:"port"`
	Rack string `json:"rack,omitempty"`
	// Endpoints are every advertised listener, inter-broker first: a
	// client is told the endpoint of the listener it connected to.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
}

// Endpoint returns the broker's endpoint for the named listener. A broker
// known only by Host and Port (a view from an older kbroker) has one
// PLAINTEXT endpoint there.
func (b BrokerInfo) Endpoint(listener string) (Endpoint, bool) {
	if len(b.Endpoints) == 0 {
		if listener == "PLAINTEXT" {
			return Endpoint{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: b.Host, Port: b.Port}, true
		}
		return Endpoint{}, false
	}
	for _, e := range b.Endpoints {
		if e.Listener == listener {
			return e, true
		}
	}
	return Endpoint{}, false
}

// withEndpoints returns b with its endpoints set, Host and Port from the
// first (the inter-broker listener's).
func (b BrokerInfo) withEndpoints(eps []Endpoint) BrokerInfo {
	b.Endpoints = slices.Clone(eps)
	if len(eps) > 0 {
		b.Host, b.Port = eps[0].Host, eps[0].Port
	}
	return b
}

// PartitionState is the replica assignment and leadership of one partition.
type PartitionState struct {
	Replicas    []int32 `json:"replicas"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	ISR         []int32 `json:"isr"`
	// PartitionEpoch is the version of the partition's state znode (Kafka's
	// partition epoch): ISR change requests must name the current one.
	PartitionEpoch int32 `json:"partition_epoch,omitempty"`
	// AddingReplicas and RemovingReplicas are an ongoing reassignment's
	// replicas being added and removed (Kafka's adding_replicas and
	// removing_replicas of /brokers/topics/<t>); Replicas then holds both
	// the target and the original replicas (reassign.go).
	AddingReplicas   []int32 `json:"adding_replicas,omitempty"`
	RemovingReplicas []int32 `json:"removing_replicas,omitempty"`
	// OfflineReplicas are the replicas whose broker is live but whose log
	// dir failed (logdirs.go): neither in the ISR nor leading. Replicas of
	// brokers missing from the view are offline too, and not listed here.
	OfflineReplicas []int32 `json:"offline_replicas,omitempty"`
}

// Reassigning reports whether a reassignment of the partition is ongoing.
func (ps PartitionState) Reassigning() bool {
	return len(ps.AddingReplicas) > 0 || len(ps.RemovingReplicas) > 0
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Topic is one topic's assignment and config overrides.
type Topic struct {
	Name       string            `json:"name"`
	ID         [16]byte          `json:"id"`
	Partitions []PartitionState  `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// Metadata is an immutable snapshot of the cluster: never modify a
// snapshot; the controller builds a new one for every change.
type Metadata struct {
	ClusterID    string            `json:"cluster_id"`
	ControllerID int32             `json:"controller_id"`
	Brokers      []BrokerInfo      `json:"brokers"`
	Topics       map[string]*Topic `json:"topics"`
	// DeletedTopicIDs are the deleted topics some replica has not yet
	// confirmed (sorted): brokers delete every replica of these. A topic
	// merely absent from a view (a damaged znode, a view from an older
	// controller) keeps its data.
	DeletedTopicIDs [][16]byte `json:"deleted_topic_ids,omitempty"`
	// UserConfigs are the user configs of /config/users: user name ->
	// Kafka config key -> value. A user's SCRAM credentials are the keys
	// named after their mechanism (SCRAM-SHA-256: Kafka's stored form,
	// salt=...,stored_key=...,server_key=...,iterations=N); its quotas
	// share the map. Users without any config are absent; the default
	// user's quotas (/config/users/<default>) are under "<default>". The
	// values are key material: never log them.
	UserConfigs map[string]map[string]string `json:"user_configs,omitempty"`
	// ClientConfigs are the client id quotas of /config/clients: client
	// id -> quota key -> value, the default client id under "<default>";
	// UserClientConfigs those of /config/users/<user>/clients/<client>:
	// user -> client id -> quota key -> value (quotas.go).
	ClientConfigs     map[string]map[string]string            `json:"client_configs,omitempty"`
	UserClientConfigs map[string]map[string]map[string]string `json:"user_client_configs,omitempty"`
	// BrokerConfigs are the dynamic broker configs of /config/brokers:
	// broker id (or "<default>", the cluster-wide defaults) -> Kafka
	// config key -> value (brokerconfigs.go).
	BrokerConfigs map[string]map[string]string `json:"broker_configs,omitempty"`
	// ACLs are every ACL binding of /kafka-acl and
	// /kafka-acl-extended/prefixed, sorted (sortBindings: resource type,
	// pattern type, name, principal, host, operation, permission), each
	// once. The embedded node's state file keeps them in its own form
	// (localState.ACLs), not through this field.
	ACLs []acl.Binding `json:"-"`
	// Sequence numbers the views one controller epoch publishes, so a
	// broker never applies an older view after a newer one.
	Sequence uint64 `json:"-"`
}

// IsDeleted reports whether the topic with id was deleted.
func (m *Metadata) IsDeleted(id [16]byte) bool {
	return slices.Contains(m.DeletedTopicIDs, id)
}

// Broker returns the broker with id.
func (m *Metadata) Broker(id int32) (BrokerInfo, bool) {
	for _, b := range m.Brokers {
		if b.ID == id {
			return b, true
		}
	}
	return BrokerInfo{}, false
}

// partitionsLedBy counts the partitions broker id leads.
func (m *Metadata) partitionsLedBy(id int32) int {
	n := 0
	for _, t := range m.Topics {
		for _, ps := range t.Partitions {
			if ps.Leader == id {
				n++
			}
		}
	}
	return n
}

// TopicByID finds a topic by its UUID.
func (m *Metadata) TopicByID(id [16]byte) (*Topic, bool) {
	for _, t := range m.Topics {
		if t.ID == id {
			return t, true
		}
	}
	return nil, false
}

// clone deep-copies m so a change never touches a published snapshot.
func (m *Metadata) clone() *Metadata {
	out := &Metadata{
		ClusterID:    m.ClusterID,
		ControllerID: m.ControllerID,
		Brokers:      slices.Clone(m.Brokers),
		Topics:       make(map[string]*Topic, len(m.Topics)),

		DeletedTopicIDs: slices.Clone(m.DeletedTopicIDs),
		UserConfigs:     cloneUserConfigs(m.UserConfigs),
		ACLs:            slices.Clone(m.ACLs),

		ClientConfigs:     cloneUserConfigs(m.ClientConfigs),
		UserClientConfigs: cloneUserClientConfigs(m.UserClientConfigs),
		BrokerConfigs:     cloneUserConfigs(m.BrokerConfigs),
	}
	for name, t := range m.Topics {
		nt := &Topic{Name: t.Name, ID: t.ID, Partitions: make([]PartitionState, len(t.Partitions))}
		for i, p := range t.Partitions {
			nt.Partitions[i] = PartitionState{
				Replicas:       slices.Clone(p.Replicas),
				Leader:         p.Leader,
				LeaderEpoch:    p.LeaderEpoch,
				ISR:            slices.Clone(p.ISR),
				PartitionEpoch: p.PartitionEpoch,

				AddingReplicas:   slices.Clone(p.AddingReplicas),
				RemovingReplicas: slices.Clone(p.RemovingReplicas),
				OfflineReplicas:  slices.Clone(p.OfflineReplicas),
			}
		}
		if t.Configs != nil {
			nt.Configs = make(map[string]string, len(t.Configs))
			for k, v := range t.Configs {
				nt.Configs[k] = v
			}
		}
		out.Topics[name] = nt
	}
	return out
}

// cloneUserConfigs deep-copies user configs (nil stays nil).
func cloneUserConfigs(in map[string]map[string]string) map[string]map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]map[string]string, len(in))
	for user, configs := range in {
		out[user] = maps.Clone(configs)
	}
	return out
}

// withoutDeleted returns md without the topics whose ids are in deleted,
// those ids added to its DeletedTopicIDs (sorted) so that the broker
// removes their replicas; md itself when it has none of them.
func withoutDeleted(md *Metadata, deleted map[[16]byte]bool) *Metadata {
	if len(deleted) == 0 {
		return md
	}
	var drop []string
	for name, t := range md.Topics {
		if deleted[t.ID] {
			drop = append(drop, name)
		}
	}
	if len(drop) == 0 {
		return md
	}
	out := md.clone()
	out.Sequence = md.Sequence
	for _, name := range drop {
		id := out.Topics[name].ID
		delete(out.Topics, name)
		if !slices.Contains(out.DeletedTopicIDs, id) {
			out.DeletedTopicIDs = append(out.DeletedTopicIDs, id)
		}
	}
	slices.SortFunc(out.DeletedTopicIDs, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	return out
}
