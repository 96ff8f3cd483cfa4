// Package zk keeps kbroker's cluster state in ZooKeeper with Apache Kafka's
// ZooKeeper-mode layout and JSON, byte for byte where it matters, so
// zkCli.sh inspections and Kafka operational knowledge carry over.
//
// The layout and formats copy kafka/zk/ZkData.scala (3.x) and the semantics
// of every write copy kafka/zk/KafkaZkClient.scala:
//
//	/brokers/ids/<id>                            ephemeral broker registration (BrokerIdZNode, v5 JSON)
//	/controller                                  ephemeral controller registration
//	/controller_epoch                            controller epoch, plain decimal text
//	/brokers/topics/<t>                          replica assignment and topic id (TopicZNode, v3)
//	/brokers/topics/<t>/partitions/<p>/state     leader, leader epoch, ISR (TopicPartitionStateZNode)
//	/config/topics/<t>                           topic config overrides (ConfigEntityZNode)
//	/config/users/<sanitized user>               user configs: SCRAM credentials, quotas (ConfigEntityZNode)
//	/config/changes/config_change_<seq>          config change notification (users.go)
//	/admin/delete_topics/<t>                     topic marked for deletion (empty)
//	/isr_change_notification/isr_change_<seq>    ISR change notification
//	/cluster/id                                  cluster id
//	/latest_producer_id_block                    last producer id block handed out
//
// Pure encode/decode functions live in znodes.go; Store (store.go and the
// files next to it) performs the reads and the fenced writes. Every write a
// controller makes is a ZooKeeper multi that first checks the version of
// /controller_epoch the controller won with, so a deposed controller's
// writes fail with ErrControllerMoved instead of overwriting its successor's.
package zk

import "strconv"

// Paths, relative to the chroot. Names follow ZkData.scala's objects.
const (
	BrokersPath                 = "/brokers"
	BrokerIDsPath               = "/brokers/ids"
	TopicsPath                  = "/brokers/topics"
	BrokerSequenceIDPath        = "/brokers/seqid"
	ControllerPath              = "/controller"
	ControllerEpochPath         = "/controller_epoch"
	ConfigPath                  = "/config"
	ConfigChangesPath           = "/config/changes"
	TopicConfigsPath            = "/config/topics"
	AdminPath                   = "/admin"
	DeleteTopicsPath            = "/admin/delete_topics"
	ISRChangeNotificationPath   = "/isr_change_notification"
	ISRChangeSequencePrefix     = "isr_change_"
	LogDirEventNotificationPath = "/log_dir_event_notification"
	ClusterPath                 = "/cluster"
	ClusterIDPath               = "/cluster/id"
	ProducerIDBlockPath         = "/latest_producer_id_block"
	ConsumersPath               = "/consumers"
)

// persistentPaths are the znodes a Kafka broker creates at startup
// (ZkData.PersistentZkPaths): parents that writes expect to exist.
var persistentPaths = []string{
	ConsumersPath,
	BrokerIDsPath,
	TopicsPath,
	ConfigChangesPath,
	DeleteTopicsPath,
	BrokerSequenceIDPath,
	ISRChangeNotificationPath,
	ProducerIDBlockPath,
	LogDirEventNotificationPath,
	TopicConfigsPath,
	ConfigPath + "/clients",
	ConfigPath + "/users",
	ConfigPath + "/brokers",
	ConfigPath + "/ips",
}

// BrokerIDPath is /brokers/ids/<id>.
func BrokerIDPath(id int32) string { return BrokerIDsPath + "/" + strconv.Itoa(int(id)) }

// TopicPath is /brokers/topics/<topic>.
func TopicPath(topic string) string { return TopicsPath + "/" + topic }

// TopicPartitionsPath is /brokers/topics/<topic>/partitions.
func TopicPartitionsPath(topic string) string { return TopicPath(topic) + "/partitions" }

// TopicPartitionPath is /brokers/topics/<topic>/partitions/<partition>.
func TopicPartitionPath(topic string, partition int32) string {
	return TopicPartitionsPath(topic) + "/" + strconv.Itoa(int(partition))
}

// PartitionStatePath is /brokers/topics/<topic>/partitions/<partition>/state.
func PartitionStatePath(topic string, partition int32) string {
	return TopicPartitionPath(topic, partition) + "/state"
}

// TopicConfigPath is /config/topics/<topic>.
func TopicConfigPath(topic string) string { return TopicConfigsPath + "/" + topic }

// DeleteTopicPath is /admin/delete_topics/<topic>.
func DeleteTopicPath(topic string) string { return DeleteTopicsPath + "/" + topic }

// ISRChangeNotificationSequencePath is /isr_change_notification/isr_change_<seq>.
func ISRChangeNotificationSequencePath(seq string) string {
	return ISRChangeNotificationPath + "/" + ISRChangeSequencePrefix + seq
}
