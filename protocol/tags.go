package protocol

import "github.com/twmb/franz-go/pkg/kmsg"

// TagTopicID is a tagged field of kbroker's own that a follower puts on each
// topic of an OffsetForLeaderEpoch request (v4+, flexible): the 16-byte topic
// id, which that API has no field for. The leader then answers only for the
// same incarnation of the topic. Only kbroker brokers send it; Kafka and
// clients ignore tags they do not know.
const TagTopicID = 0x6b66

// TopicIDTag returns the topic id carried in tags (TagTopicID), or zero.
func TopicIDTag(tags kmsg.Tags) [16]byte {
	var id [16]byte
	tags.Each(func(tag uint32, v []byte) {
		if tag == TagTopicID && len(v) == 16 {
			id = [16]byte(v)
		}
	})
	return id
}
