package controller

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/kbroker/kbroker/internal/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The controller tells every broker the whole cluster view with one
// UpdateMetadata request (v7) per change; brokers derive their partition
// roles from it, so no separate LeaderAndIsr round is needed. Two tagged
// fields of kbroker's own carry what Kafka brokers read from ZooKeeper
// instead: each topic's config overrides, the cluster id, the user
// configs (SCRAM credentials, so every broker can authenticate), the client
// quotas (so every broker can enforce them) and the ACLs (so every broker
// can describe and, later, enforce them). Only kbroker brokers talk to a
// kbroker controller, and tagged fields are ignored by anything that does
// not know them.
const (
	updateMetadataVersion = 7
	tagTopicConfigs       = 0x6b62 // JSON object of the topic's overrides
	tagClusterID          = 0x6b63 // the cluster id
	tagDeletedTopics      = 0x6b64 // deleted topic ids, 16 bytes each
	tagViewSequence       = 0x6b65 // big-endian uint64: the view's number within the controller epoch
	tagUserConfigs        = 0x6b66 // JSON object: user -> config key -> value (/config/users)
	tagACLs               = 0x6b67 // JSON array of aclRecord: every ACL binding (/kafka-acl, /kafka-acl-extended)
	tagQuotaConfigs       = 0x6b68 // JSON quotaConfigsTag: client id and user + client id quotas (/config/clients, /config/users/<u>/clients)
	tagReassignment       = 0x6b69 // on a partition: JSON reassignmentTag, its ongoing reassignment's adding and removing replicas
	tagBrokerConfigs      = 0x6b6a // JSON object: broker id or <default> -> dynamic config key -> value (/config/brokers)
)

// EncodeUpdateMetadata builds the UpdateMetadata request for a snapshot.
func EncodeUpdateMetadata(md *Metadata, controllerEpoch int32) *kmsg.UpdateMetadataRequest {
	req := kmsg.NewPtrUpdateMetadataRequest()
	req.Version = updateMetadataVersion
	req.ControllerID = md.ControllerID
	req.ControllerEpoch = controllerEpoch
	req.BrokerEpoch = -1
	req.UnknownTags.Set(tagClusterID, []byte(md.ClusterID))
	req.UnknownTags.Set(tagViewSequence, binary.BigEndian.AppendUint64(nil, md.Sequence))
	if len(md.DeletedTopicIDs) > 0 {
		ids := make([]byte, 0, 16*len(md.DeletedTopicIDs))
		for _, id := range md.DeletedTopicIDs {
			ids = append(ids, id[:]...)
		}
		req.UnknownTags.Set(tagDeletedTopics, ids)
	}
	if len(md.UserConfigs) > 0 {
		js, _ := json.Marshal(md.UserConfigs) // maps of strings always encode
		req.UnknownTags.Set(tagUserConfigs, js)
	}
	if len(md.ACLs) > 0 {
		js, _ := json.Marshal(aclRecords(md.ACLs)) // strings and integers always encode
		req.UnknownTags.Set(tagACLs, js)
	}
	if len(md.ClientConfigs) > 0 || len(md.UserClientConfigs) > 0 {
		js, _ := json.Marshal(quotaConfigsTag{Clients: md.ClientConfigs, UserClients: md.UserClientConfigs}) // maps of strings always encode
		req.UnknownTags.Set(tagQuotaConfigs, js)
	}
	if len(md.BrokerConfigs) > 0 {
		js, _ := json.Marshal(md.BrokerConfigs) // maps of strings always encode
		req.UnknownTags.Set(tagBrokerConfigs, js)
	}
	live := map[int32]bool{}
	for _, b := range md.Brokers {
		live[b.ID] = true
		lb := kmsg.NewUpdateMetadataRequestLiveBroker()
		lb.ID = b.ID
		eps := b.Endpoints
		if len(eps) == 0 {
			eps = []Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: b.Host, Port: b.Port}}
		}
		for _, e := range eps {
			ep := kmsg.NewUpdateMetadataRequestLiveBrokerEndpoint()
			ep.Host, ep.Port, ep.ListenerName = e.Host, e.Port, e.Listener
			ep.SecurityProtocol = securityProtocolCode(e.SecurityProtocol)
			lb.Endpoints = append(lb.Endpoints, ep)
		}
		if b.Rack != "" {
			rack := b.Rack
			lb.Rack = &rack
		}
		req.LiveBrokers = append(req.LiveBrokers, lb)
	}
	names := make([]string, 0, len(md.Topics))
	for name := range md.Topics {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t := md.Topics[name]
		ts := kmsg.NewUpdateMetadataRequestTopicState()
		ts.Topic, ts.TopicID = t.Name, t.ID
		if len(t.Configs) > 0 {
			js, _ := json.Marshal(t.Configs) // a map of strings always encodes
			ts.UnknownTags.Set(tagTopicConfigs, js)
		}
		for i, p := range t.Partitions {
			ps := kmsg.NewUpdateMetadataRequestTopicPartition()
			ps.Topic, ps.Partition = t.Name, int32(i)
			ps.ControllerEpoch = controllerEpoch
			ps.Leader, ps.LeaderEpoch = p.Leader, p.LeaderEpoch
			ps.ISR, ps.Replicas = p.ISR, p.Replicas
			ps.ZKVersion = p.PartitionEpoch
			if p.Reassigning() {
				js, _ := json.Marshal(reassignmentTag{Adding: p.AddingReplicas, Removing: p.RemovingReplicas}) // int slices always encode
				ps.UnknownTags.Set(tagReassignment, js)
			}
			for _, r := range p.Replicas {
				if !live[r] || slices.Contains(p.OfflineReplicas, r) {
					ps.OfflineReplicas = append(ps.OfflineReplicas, r)
				}
			}
			ts.PartitionStates = append(ts.PartitionStates, ps)
		}
		req.TopicStates = append(req.TopicStates, ts)
	}
	return req
}

// DecodeUpdateMetadata turns an UpdateMetadata request from a kbroker
// controller back into the snapshot it describes.
func DecodeUpdateMetadata(req *kmsg.UpdateMetadataRequest) (*Metadata, error) {
	if req.Version < 6 {
		return nil, fmt.Errorf("UpdateMetadata v%d carries no topic configs: kbroker controllers send v%d", req.Version, updateMetadataVersion)
	}
	md := &Metadata{ControllerID: req.ControllerID, Topics: map[string]*Topic{}}
	var tagErr error
	req.UnknownTags.Each(func(tag uint32, v []byte) {
		switch tag {
		case tagClusterID:
			md.ClusterID = string(v)
		case tagViewSequence:
			if len(v) == 8 {
				md.Sequence = binary.BigEndian.Uint64(v)
			}
		case tagDeletedTopics:
			for ; len(v) >= 16; v = v[16:] {
				md.DeletedTopicIDs = append(md.DeletedTopicIDs, [16]byte(v[:16]))
			}
		case tagUserConfigs:
			if err := json.Unmarshal(v, &md.UserConfigs); err != nil {
				// json's message names the position, never the content
				// (which holds credentials).
				tagErr = fmt.Errorf("bad user configs tag: %w", err)
			}
		case tagQuotaConfigs:
			var q quotaConfigsTag
			if err := json.Unmarshal(v, &q); err != nil {
				tagErr = fmt.Errorf("bad quota configs tag: %w", err)
			}
			md.ClientConfigs, md.UserClientConfigs = q.Clients, q.UserClients
		case tagBrokerConfigs:
			if err := json.Unmarshal(v, &md.BrokerConfigs); err != nil {
				tagErr = fmt.Errorf("bad broker configs tag: %w", err)
			}
		case tagACLs:
			var recs []aclRecord
			if err := json.Unmarshal(v, &recs); err != nil {
				tagErr = fmt.Errorf("bad ACLs tag: %w", err)
				return
			}
			md.ACLs = make([]acl.Binding, len(recs))
			for i, r := range recs {
				md.ACLs[i] = r.binding()
			}
		}
	})
	if tagErr != nil {
		return nil, tagErr
	}
	for _, lb := range req.LiveBrokers {
		eps := make([]Endpoint, 0, len(lb.Endpoints))
		for _, e := range lb.Endpoints {
			eps = append(eps, Endpoint{Listener: e.ListenerName, SecurityProtocol: securityProtocolName(e.SecurityProtocol), Host: e.Host, Port: e.Port})
		}
		b := BrokerInfo{ID: lb.ID}.withEndpoints(eps)
		if lb.Rack != nil {
			b.Rack = *lb.Rack
		}
		md.Brokers = append(md.Brokers, b)
	}
	sort.Slice(md.Brokers, func(i, j int) bool { return md.Brokers[i].ID < md.Brokers[j].ID })
	live := make(map[int32]bool, len(md.Brokers))
	for _, b := range md.Brokers {
		live[b.ID] = true
	}
	for _, ts := range req.TopicStates {
		t := &Topic{Name: ts.Topic, ID: ts.TopicID, Partitions: make([]PartitionState, len(ts.PartitionStates))}
		var err error
		ts.UnknownTags.Each(func(tag uint32, v []byte) {
			if tag == tagTopicConfigs && err == nil {
				err = json.Unmarshal(v, &t.Configs)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("topic %s: bad config tag: %w", ts.Topic, err)
		}
		for _, ps := range ts.PartitionStates {
			if ps.Partition < 0 || int(ps.Partition) >= len(t.Partitions) {
				return nil, fmt.Errorf("topic %s: partition %d out of range", ts.Topic, ps.Partition)
			}
			st := PartitionState{Replicas: ps.Replicas, Leader: ps.Leader, LeaderEpoch: ps.LeaderEpoch, ISR: ps.ISR, PartitionEpoch: ps.ZKVersion}
			for _, r := range ps.OfflineReplicas {
				if live[r] {
					// A live broker's replica in a failed log dir
					// (the others are offline by being absent).
					st.OfflineReplicas = append(st.OfflineReplicas, r)
				}
			}
			var tagErr error
			ps.UnknownTags.Each(func(tag uint32, v []byte) {
				if tag != tagReassignment || tagErr != nil {
					return
				}
				var r reassignmentTag
				if tagErr = json.Unmarshal(v, &r); tagErr == nil {
					st.AddingReplicas, st.RemovingReplicas = r.Adding, r.Removing
				}
			})
			if tagErr != nil {
				return nil, fmt.Errorf("%s-%d: bad reassignment tag: %w", ts.Topic, ps.Partition, tagErr)
			}
			t.Partitions[ps.Partition] = st
		}
		md.Topics[t.Name] = t
	}
	return md, nil
}

// securityProtocolCode and securityProtocolName map Kafka's
// SecurityProtocol ids, as UpdateMetadata carries them.
func securityProtocolCode(name string) int16 {
	switch name {
	case "SSL":
		return 1
	case "SASL_PLAINTEXT":
		return 2
	case "SASL_SSL":
		return 3
	}
	return 0
}

func securityProtocolName(code int16) string {
	switch code {
	case 1:
		return "SSL"
	case 2:
		return "SASL_PLAINTEXT"
	case 3:
		return "SASL_SSL"
	}
	return "PLAINTEXT"
}

// reassignmentTag is a partition's ongoing reassignment in the view.
type reassignmentTag struct {
	Adding   []int32 `json:"adding,omitempty"`
	Removing []int32 `json:"removing,omitempty"`
}
