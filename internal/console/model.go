// Package console is kbroker's live web console: a page served on the
// broker's HTTP (metrics) address, with its assets embedded in the binary
// (no CDN, works offline), updated by server-sent events without a reload.
// It shows the cluster (brokers, controller), every partition as a replica
// diagram (leader, ISR, out-of-sync and offline replicas, log start, high
// watermark, log end, follower lag), consumer groups with their lag, a
// timeline of the cluster's history, and this broker's throughput.
//
// The console is read-only: it refuses every method but GET and HEAD. It
// knows nothing of the broker: a Source gives it snapshots and the
// timeline's events, which the cluster's controller records as it decides
// (controller/events.go), so the timeline is the same on every broker and
// outlives a broker's restart.
// Every name is rendered by the page as text (DOM textContent), never as
// markup.
package console

import "time"

// Snapshot is the cluster as one broker sees it at one moment.
type Snapshot struct {
	Time         time.Time `json:"time"`
	Self         int32     `json:"self"` // the broker serving the console
	ClusterID    string    `json:"cluster_id"`
	ControllerID int32     `json:"controller_id"` // -1: none known
	Brokers      []Broker  `json:"brokers"`       // by id
	Topics       []Topic   `json:"topics"`        // by name
	Groups       []Group   `json:"groups"`        // those this broker coordinates, by name
	Stats        Stats     `json:"stats"`
	// ViewVersion changes whenever the cluster view does (leaders, ISRs,
	// brokers); the hub diffs only snapshots whose views differ.
	ViewVersion uint64 `json:"view_version"`
}

// Broker is one broker of the view (alive ones) or one named by a
// partition's replicas but not registered (dead ones).
type Broker struct {
	ID         int32    `json:"id"`
	Rack       string   `json:"rack,omitempty"`
	Endpoints  []string `json:"endpoints,omitempty"` // LISTENER://host:port
	Alive      bool     `json:"alive"`
	Controller bool     `json:"controller"`
}

// Topic is one topic and its partitions (by number).
type Topic struct {
	Name       string      `json:"name"`
	Internal   bool        `json:"internal,omitempty"`
	Partitions []Partition `json:"partitions"`
}

// Partition is one partition's replication state. Offsets are this
// broker's replica's (the leader's when it leads: then Lag is known), or
// -1 when it holds no replica.
type Partition struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"` // -1: offline
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	// Offline replicas are on brokers not alive in the view.
	Offline []int32 `json:"offline,omitempty"`
	// LocalRole is this broker's replica's role: "leader", "follower" or
	// "" (no replica here).
	LocalRole      string `json:"local_role,omitempty"`
	LogStartOffset int64  `json:"log_start"`
	HighWatermark  int64  `json:"hw"`
	LogEndOffset   int64  `json:"leo"`
	// FollowerLag is, on the leader, each follower's distance in offsets
	// from the log end (-1: not fetched yet), keyed by broker id.
	FollowerLag map[int32]int64 `json:"follower_lag,omitempty"`
}

// UnderReplicated reports an ISR smaller than the replica set.
func (p Partition) UnderReplicated() bool { return len(p.ISR) < len(p.Replicas) }

// Group is a consumer group.
type Group struct {
	Name         string        `json:"name"`
	State        string        `json:"state"`
	ProtocolType string        `json:"protocol_type"`
	Protocol     string        `json:"protocol"`
	Members      []Member      `json:"members"`
	Offsets      []GroupOffset `json:"offsets"`
	Lag          int64         `json:"lag"` // sum of the known lags
}

// Member is one group member and its assignment.
type Member struct {
	ID         string             `json:"id"`
	ClientID   string             `json:"client_id"`
	ClientHost string             `json:"client_host"`
	Assigned   map[string][]int32 `json:"assigned,omitempty"`
}

// GroupOffset is a committed offset and the lag behind the high
// watermark (-1: unknown here).
type GroupOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"`
}

// Stats are this broker's running totals; the hub turns successive ones
// into the rates the sparklines draw.
type Stats struct {
	BytesIn    float64 `json:"bytes_in"`
	BytesOut   float64 `json:"bytes_out"`
	MessagesIn float64 `json:"messages_in"`
	Requests   float64 `json:"requests"`
	// RequestTimeMs is the summed total time of those requests.
	RequestTimeMs float64 `json:"request_time_ms"`
}

// Rate is one sparkline sample: per second over the interval before At,
// and the mean request latency in it.
type Rate struct {
	At            time.Time `json:"at"`
	BytesIn       float64   `json:"bytes_in"`
	BytesOut      float64   `json:"bytes_out"`
	MessagesIn    float64   `json:"messages_in"`
	Requests      float64   `json:"requests"`
	LatencyMeanMs float64   `json:"latency_ms"`
}

// Event is one entry of the timeline: an event the controller recorded.
// Seq orders them and is the same on every broker (the controller's
// sequence plus one: zero means none).
type Event struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"`
	Topic     string    `json:"topic,omitempty"`
	Partition int32     `json:"partition"`
	Broker    int32     `json:"broker"`
	Text      string    `json:"text"`
	// ControllerEpoch is the epoch of the controller that decided it.
	ControllerEpoch int32 `json:"controller_epoch"`
	// Elections: how the leader was chosen (clean, unclean, preferred,
	// controlled_shutdown), the old and new leader and the new leader
	// epoch; ISR changes and elections: the old and new ISR.
	Election    string  `json:"election,omitempty"`
	OldLeader   int32   `json:"old_leader"`
	NewLeader   int32   `json:"new_leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	OldISR      []int32 `json:"old_isr,omitempty"`
	NewISR      []int32 `json:"new_isr,omitempty"`
	// LeaderLogEnd is an unclean election's new leader's log end offset
	// at the election (-1: not known to the controller).
	LeaderLogEnd int64 `json:"leader_log_end"`
	// A replica's truncation (replica_truncated): the offsets
	// [TruncatedFrom, TruncatedTo) it dropped to follow a new leader, and
	// at least how many of them were committed (an unclean election's
	// loss).
	TruncatedFrom int64 `json:"truncated_from,omitempty"`
	TruncatedTo   int64 `json:"truncated_to,omitempty"`
	CommittedLost int64 `json:"committed_lost,omitempty"`
}

// Event kinds.
const (
	EventBrokerJoined      = "broker_joined"
	EventBrokerDied        = "broker_died"
	EventBrokerShutdown    = "broker_shutdown"  // left after a controlled shutdown
	EventBrokerRestarted   = "broker_restarted" // left and returned between two looks
	EventControllerChanged = "controller_changed"
	EventElection          = "leader_elected"         // a clean election: the new leader was in the ISR
	EventUncleanElection   = "unclean_leader_elected" // the new leader was not in the ISR
	EventPreferredElection = "preferred_leader_elected"
	EventOffline           = "partition_offline"
	EventISRShrink         = "isr_shrink"
	EventISRExpand         = "isr_expand"
	EventTopicCreated      = "topic_created"
	EventTopicDeleted      = "topic_deleted"
	EventSummary           = "more_events" // counts a decision's events beyond the controller's bound
)
