// Package authz is the table of what each Kafka API asks the authorizer:
// for every API kbroker serves, the checks Kafka 3.9's KafkaApis makes in
// ZooKeeper mode (core/src/main/scala/kafka/server/KafkaApis.scala,
// AuthHelper, AclApis, ConfigHelper), on which resource, and what a
// refusal answers.
//
// The table is data, not code that enforces anything: each handler in
// server makes its checks next to the code they guard. A server test keeps
// the table in step with the APIs the broker registers (a new API without
// an entry fails it), and the integration authorization matrix runs every
// check of every entry, granted and refused, against a running broker.
package authz

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Grant is one permission: an operation on a resource of a type. The
// resource is the request's (its topic, group or transactional id) or, for
// Cluster, "kafka-cluster".
type Grant struct {
	Op       kmsg.ACLOperation
	Resource kmsg.ACLResourceType
	// AnyResource: the operation on any one resource of the type will do
	// (Kafka's authorizeByResourceType), not on a particular one.
	AnyResource bool
}

// Effect is what a refused check does to the answer.
type Effect int8

const (
	// Refused: the resource (or the whole request) is answered with the
	// check's error code.
	Refused Effect = iota
	// LeftOut: the resource is silently missing from the answer, as if it
	// did not exist (requests for "everything": all topics, all groups,
	// all transactions).
	LeftOut
	// NoOperations: an authorized-operations field is answered 0.
	NoOperations
)

// Check is one question an API asks the authorizer.
type Check struct {
	// AnyOf are the grants that pass the check; one suffices. The first
	// names the resource the check is about (the one a LeftOut refusal
	// hides).
	AnyOf []Grant
	// Effect of a refusal, with Error the code for Refused.
	Effect Effect
	Error  int16
	// When names the requests that make the check; "" for every request
	// of the API.
	When string
}

// Rule is one API's checks, in the order Kafka makes them: with none
// granted, the first check that applies is the one a client sees.
type Rule struct {
	Key    int16
	Checks []Check
}

// Rules lists every API kbroker serves with its checks, by API key. APIs
// Kafka never authorizes (ApiVersions, SaslHandshake, SaslAuthenticate)
// have an entry without checks. It is built on each call: callers cannot
// change what the next one sees.
func Rules() []Rule {
	g := func(op kmsg.ACLOperation, rt kmsg.ACLResourceType) Grant { return Grant{Op: op, Resource: rt} }
	refused := func(code int16, when string, grants ...Grant) Check {
		return Check{AnyOf: grants, Effect: Refused, Error: code, When: when}
	}
	leftOut := func(when string, grants ...Grant) Check {
		return Check{AnyOf: grants, Effect: LeftOut, When: when}
	}
	const (
		topic   = kmsg.ACLResourceTypeTopic
		group   = kmsg.ACLResourceTypeGroup
		cluster = kmsg.ACLResourceTypeCluster
		txnID   = kmsg.ACLResourceTypeTransactionalId

		read            = kmsg.ACLOperationRead
		write           = kmsg.ACLOperationWrite
		create          = kmsg.ACLOperationCreate
		del             = kmsg.ACLOperationDelete
		alter           = kmsg.ACLOperationAlter
		describe        = kmsg.ACLOperationDescribe
		clusterAction   = kmsg.ACLOperationClusterAction
		describeConfigs = kmsg.ACLOperationDescribeConfigs
		alterConfigs    = kmsg.ACLOperationAlterConfigs
		idempotentWrite = kmsg.ACLOperationIdempotentWrite
	)
	var (
		topicFailed   = kerr.TopicAuthorizationFailed.Code
		groupFailed   = kerr.GroupAuthorizationFailed.Code
		clusterFailed = kerr.ClusterAuthorizationFailed.Code
		txnFailed     = kerr.TransactionalIDAuthorizationFailed.Code
	)
	clusterOnly := func(op kmsg.ACLOperation) []Check {
		return []Check{refused(clusterFailed, "", g(op, cluster))}
	}
	return []Rule{
		{kmsg.Produce.Int16(), []Check{
			refused(txnFailed, "transactional batches", g(write, txnID)),
			refused(topicFailed, "", g(write, topic)),
		}},
		{kmsg.Fetch.Int16(), []Check{
			refused(topicFailed, "from a follower (replica id >= 0)", g(clusterAction, cluster)),
			refused(topicFailed, "from a consumer", g(read, topic)),
		}},
		{kmsg.ListOffsets.Int16(), []Check{refused(topicFailed, "", g(describe, topic))}},
		{kmsg.Metadata.Int16(), []Check{
			refused(topicFailed, "named topics", g(describe, topic)),
			leftOut("all topics", g(describe, topic)),
			refused(topicFailed, "auto-creation of a named topic", g(create, cluster), g(create, topic)),
			{AnyOf: []Grant{g(describe, cluster)}, Effect: NoOperations, When: "cluster authorized operations (v8-10)"},
		}},
		{kmsg.UpdateMetadata.Int16(), clusterOnly(clusterAction)},
		{kmsg.ControlledShutdown.Int16(), clusterOnly(clusterAction)},
		{kmsg.OffsetCommit.Int16(), []Check{
			refused(groupFailed, "", g(read, group)),
			refused(topicFailed, "", g(read, topic)),
		}},
		{kmsg.OffsetFetch.Int16(), []Check{
			refused(groupFailed, "", g(describe, group)),
			refused(topicFailed, "named topics", g(describe, topic)),
			leftOut("all of the group's topics", g(describe, topic)),
		}},
		{kmsg.FindCoordinator.Int16(), []Check{
			refused(groupFailed, "group keys", g(describe, group)),
			refused(txnFailed, "transaction keys", g(describe, txnID)),
		}},
		{kmsg.JoinGroup.Int16(), []Check{refused(groupFailed, "", g(read, group))}},
		{kmsg.Heartbeat.Int16(), []Check{refused(groupFailed, "", g(read, group))}},
		{kmsg.LeaveGroup.Int16(), []Check{refused(groupFailed, "", g(read, group))}},
		{kmsg.SyncGroup.Int16(), []Check{refused(groupFailed, "", g(read, group))}},
		{kmsg.DescribeGroups.Int16(), []Check{refused(groupFailed, "", g(describe, group))}},
		// Kafka asks about the cluster first (then every group is listed);
		// the group comes first here as the resource a refusal hides.
		{kmsg.ListGroups.Int16(), []Check{leftOut("", g(describe, group), g(describe, cluster))}},
		{kmsg.SASLHandshake.Int16(), nil},
		{kmsg.ApiVersions.Int16(), nil},
		{kmsg.CreateTopics.Int16(), []Check{
			refused(topicFailed, "", g(create, cluster), g(create, topic)),
			refused(topicFailed, "the created topic's configs (TopicConfigErrorCode, v5+)", g(describeConfigs, topic)),
		}},
		{kmsg.DeleteTopics.Int16(), []Check{
			refused(topicFailed, "topics named by id: the name is left out too", g(describe, topic)),
			refused(topicFailed, "", g(del, topic)),
		}},
		{kmsg.DeleteRecords.Int16(), []Check{refused(topicFailed, "", g(del, topic))}},
		{kmsg.InitProducerID.Int16(), []Check{
			refused(txnFailed, "with a transactional id", g(write, txnID)),
			refused(clusterFailed, "without a transactional id", g(idempotentWrite, cluster),
				Grant{Op: write, Resource: topic, AnyResource: true}),
		}},
		{kmsg.OffsetForLeaderEpoch.Int16(), []Check{refused(topicFailed, "", g(clusterAction, cluster), g(describe, topic))}},
		{kmsg.AddPartitionsToTxn.Int16(), []Check{
			refused(txnFailed, "v0-3 (clients)", g(write, txnID)),
			refused(topicFailed, "v0-3 (clients; internal topics always)", g(write, topic)),
			refused(clusterFailed, "v4+ (brokers)", g(clusterAction, cluster)),
		}},
		{kmsg.AddOffsetsToTxn.Int16(), []Check{
			refused(txnFailed, "", g(write, txnID)),
			refused(groupFailed, "", g(read, group)),
		}},
		{kmsg.EndTxn.Int16(), []Check{refused(txnFailed, "", g(write, txnID))}},
		{kmsg.WriteTxnMarkers.Int16(), []Check{refused(clusterFailed, "", g(alter, cluster), g(clusterAction, cluster))}},
		{kmsg.TxnOffsetCommit.Int16(), []Check{
			refused(txnFailed, "", g(write, txnID)),
			refused(groupFailed, "", g(read, group)),
			refused(topicFailed, "", g(read, topic)),
		}},
		{kmsg.DescribeACLs.Int16(), clusterOnly(describe)},
		{kmsg.CreateACLs.Int16(), clusterOnly(alter)},
		{kmsg.DeleteACLs.Int16(), clusterOnly(alter)},
		{kmsg.DescribeConfigs.Int16(), []Check{
			refused(topicFailed, "topic resources", g(describeConfigs, topic)),
			refused(clusterFailed, "broker resources", g(describeConfigs, cluster)),
			refused(groupFailed, "group resources", g(describeConfigs, group)),
		}},
		{kmsg.AlterConfigs.Int16(), []Check{
			refused(topicFailed, "topic resources", g(alterConfigs, topic)),
			refused(clusterFailed, "broker resources", g(alterConfigs, cluster)),
		}},
		{kmsg.AlterReplicaLogDirs.Int16(), clusterOnly(alter)},
		{kmsg.DescribeLogDirs.Int16(), clusterOnly(describe)},
		{kmsg.SASLAuthenticate.Int16(), nil},
		{kmsg.CreatePartitions.Int16(), []Check{refused(topicFailed, "", g(alter, topic))}},
		{kmsg.DeleteGroups.Int16(), []Check{refused(groupFailed, "", g(del, group))}},
		{kmsg.ElectLeaders.Int16(), clusterOnly(alter)},
		{kmsg.AlterPartitionAssignments.Int16(), clusterOnly(alter)},
		{kmsg.ListPartitionReassignments.Int16(), clusterOnly(describe)},
		{kmsg.IncrementalAlterConfigs.Int16(), []Check{
			refused(topicFailed, "topic resources", g(alterConfigs, topic)),
			refused(clusterFailed, "broker resources", g(alterConfigs, cluster)),
			refused(groupFailed, "group resources", g(alterConfigs, group)),
		}},
		{kmsg.OffsetDelete.Int16(), []Check{
			refused(groupFailed, "", g(del, group)),
			refused(topicFailed, "", g(read, topic)),
		}},
		{kmsg.DescribeClientQuotas.Int16(), clusterOnly(describeConfigs)},
		{kmsg.AlterClientQuotas.Int16(), clusterOnly(alterConfigs)},
		{kmsg.DescribeUserSCRAMCredentials.Int16(), clusterOnly(describe)},
		{kmsg.AlterUserSCRAMCredentials.Int16(), clusterOnly(alter)},
		{kmsg.AlterPartition.Int16(), clusterOnly(clusterAction)},
		{kmsg.DescribeCluster.Int16(), []Check{
			{AnyOf: []Grant{g(describe, cluster)}, Effect: NoOperations, When: "cluster authorized operations"},
		}},
		{kmsg.DescribeProducers.Int16(), []Check{refused(topicFailed, "", g(read, topic))}},
		{kmsg.DescribeTransactions.Int16(), []Check{
			refused(txnFailed, "", g(describe, txnID)),
			leftOut("the transaction's topics", g(describe, topic)),
		}},
		{kmsg.ListTransactions.Int16(), []Check{leftOut("", g(describe, txnID))}},
		// KIP-848: Read on the group, then Describe on every subscribed
		// topic name (one missing refuses the heartbeat).
		{kmsg.ConsumerGroupHeartbeat.Int16(), []Check{
			refused(groupFailed, "", g(read, group)),
			refused(topicFailed, "subscribed topic names", g(describe, topic)),
		}},
		{kmsg.ConsumerGroupDescribe.Int16(), []Check{
			refused(groupFailed, "", g(describe, group)),
			{AnyOf: []Grant{g(describe, group)}, Effect: NoOperations, When: "group authorized operations"},
		}},
		// KIP-932 share groups (KafkaApis 4.1): the heartbeat as
		// ConsumerGroupHeartbeat; ShareFetch and ShareAcknowledge Read on
		// the group, then Read on each topic (per partition).
		{kmsg.ShareGroupHeartbeat.Int16(), []Check{
			refused(groupFailed, "", g(read, group)),
			refused(topicFailed, "subscribed topic names", g(describe, topic)),
		}},
		{kmsg.ShareGroupDescribe.Int16(), []Check{
			refused(groupFailed, "", g(describe, group)),
			{AnyOf: []Grant{g(describe, group)}, Effect: NoOperations, When: "group authorized operations"},
		}},
		{kmsg.ShareFetch.Int16(), []Check{
			refused(groupFailed, "", g(read, group)),
			refused(topicFailed, "", g(read, topic)),
		}},
		{kmsg.ShareAcknowledge.Int16(), []Check{
			refused(groupFailed, "", g(read, group)),
			refused(topicFailed, "", g(read, topic)),
		}},
		// Inter-broker: a partition leader reads and writes share state
		// with the group's coordinator.
		{kmsg.ReadShareGroupState.Int16(), []Check{refused(clusterFailed, "", g(clusterAction, cluster))}},
		{kmsg.WriteShareGroupState.Int16(), []Check{refused(clusterFailed, "", g(clusterAction, cluster))}},
		// Share group offsets (operators): Describe / Read / Delete on
		// the group, then Describe or Read on each topic.
		{kmsg.DescribeShareGroupOffsets.Int16(), []Check{
			refused(groupFailed, "", g(describe, group)),
			refused(topicFailed, "named topics", g(describe, topic)),
		}},
		{kmsg.AlterShareGroupOffsets.Int16(), []Check{
			refused(groupFailed, "", g(read, group)),
			refused(topicFailed, "", g(read, topic)),
		}},
		{kmsg.DeleteShareGroupOffsets.Int16(), []Check{
			refused(groupFailed, "", g(del, group)),
			refused(topicFailed, "", g(read, topic)),
		}},
	}
}

// Lookup returns the rule of API key, and whether the table has one.
func Lookup(key int16) (Rule, bool) {
	for _, r := range Rules() {
		if r.Key == key {
			return r, true
		}
	}
	return Rule{}, false
}
