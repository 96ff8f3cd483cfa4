package zk

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
)

// This file encodes and decodes the znodes of Kafka's ZooKeeper layout, as
// kafka/zk/ZkData.scala does. Everything here is pure. Decoders never panic:
// bad content gives a *MalformedError naming the znode and the problem.
//
// Key order: Kafka writes most of these from Scala/Java hash maps, so its
// key order is an accident of hashing; we write the order `zkCli.sh get`
// shows on a Kafka cluster. Readers (ours and Kafka's) do not care.

// ErrMalformed is wrapped by every decoding error (see MalformedError).
var ErrMalformed = errors.New("malformed znode")

// MalformedError reports a znode whose content cannot be decoded.
type MalformedError struct {
	Path   string // the znode, chroot-relative unless a Store added its chroot
	Reason string // what is wrong
	Data   []byte // the content, for the message
	// Hidden: the content holds secrets (SCRAM keys) and is not shown.
	Hidden bool
}

func (e *MalformedError) Error() string {
	if e.Hidden {
		return fmt.Sprintf("malformed znode %s: %s (content not shown: it holds credentials)", e.Path, e.Reason)
	}
	data := e.Data
	const maxShown = 256
	suffix := ""
	if len(data) > maxShown {
		data, suffix = data[:maxShown], "..."
	}
	return fmt.Sprintf("malformed znode %s: %s (content %q%s)", e.Path, e.Reason, data, suffix)
}

// Unwrap makes errors.Is(err, ErrMalformed) hold.
func (e *MalformedError) Unwrap() error { return ErrMalformed }

func malformed(path string, data []byte, format string, args ...any) error {
	return &MalformedError{Path: path, Reason: fmt.Sprintf(format, args...), Data: slices.Clone(data)}
}

// hiddenMalformed is malformed for a znode whose content must not appear
// in messages.
func hiddenMalformed(path string, format string, args ...any) error {
	return &MalformedError{Path: path, Reason: fmt.Sprintf(format, args...), Hidden: true}
}

// unmarshal decodes a JSON object into v, naming path on failure.
func unmarshal(path string, data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return malformed(path, data, "empty, expected a JSON object")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return malformed(path, data, "invalid JSON: %v", err)
	}
	return nil
}

// marshal writes v as Jackson does: compact, no HTML escaping.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// Only strings, numbers, slices and maps of them reach here, which
	// always encode.
	_ = enc.Encode(v)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// object builds a JSON object with keys in the order they are added.
type object struct{ buf bytes.Buffer }

func (o *object) add(key string, v any) *object {
	return o.addRaw(key, marshal(v))
}

func (o *object) addRaw(key string, raw []byte) *object {
	if o.buf.Len() == 0 {
		o.buf.WriteByte('{')
	} else {
		o.buf.WriteByte(',')
	}
	o.buf.Write(marshal(key))
	o.buf.WriteByte(':')
	o.buf.Write(raw)
	return o
}

func (o *object) bytes() []byte {
	if o.buf.Len() == 0 {
		return []byte("{}")
	}
	return append(slices.Clone(o.buf.Bytes()), '}')
}

// int32List encodes ids as a JSON array, [] (never null) when empty.
func int32List(ids []int32) []byte {
	if ids == nil {
		ids = []int32{}
	}
	return marshal(ids)
}

// partitionMap encodes {"0":[1,2],"1":[2,3]} with partitions in numeric
// order.
func partitionMap(m map[int32][]int32) []byte {
	var o object
	for _, p := range slices.Sorted(maps.Keys(m)) {
		o.addRaw(strconv.Itoa(int(p)), int32List(m[p]))
	}
	return o.bytes()
}

// ---------------------------------------------------------------------------
// /controller and /controller_epoch

// ControllerInfo is /controller: which broker is the controller.
type ControllerInfo struct {
	Version  int   // 1 or 2; EncodeController writes 2
	BrokerID int32 // the controller
	// Timestamp is when it was elected, Unix ms (informational).
	Timestamp int64
	// KRaftControllerEpoch is -1 for a ZooKeeper-mode controller; a
	// positive value means a KRaft controller took the cluster over
	// (KIP-866 migration), which kbroker does not support.
	KRaftControllerEpoch int32
}

// EncodeController encodes /controller as Kafka 3.x does (ControllerZNode):
// {"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}.
func EncodeController(brokerID int32, timestampMs int64) []byte {
	var o object
	o.add("version", 2).add("brokerid", brokerID).add("timestamp", strconv.FormatInt(timestampMs, 10)).add("kraftControllerEpoch", -1)
	return o.bytes()
}

// DecodeController decodes /controller, versions 1 and 2.
func DecodeController(data []byte) (ControllerInfo, error) {
	var raw struct {
		Version              *int    `json:"version"`
		BrokerID             *int32  `json:"brokerid"`
		Timestamp            *string `json:"timestamp"`
		KRaftControllerEpoch *int32  `json:"kraftControllerEpoch"`
	}
	if err := unmarshal(ControllerPath, data, &raw); err != nil {
		return ControllerInfo{}, err
	}
	if raw.BrokerID == nil {
		return ControllerInfo{}, malformed(ControllerPath, data, `no "brokerid"`)
	}
	info := ControllerInfo{Version: 1, BrokerID: *raw.BrokerID, KRaftControllerEpoch: -1}
	if raw.Version != nil {
		info.Version = *raw.Version
	}
	if raw.Timestamp != nil {
		// Kafka never reads the timestamp; a bad one is not worth failing.
		info.Timestamp, _ = strconv.ParseInt(*raw.Timestamp, 10, 64)
	}
	if raw.KRaftControllerEpoch != nil {
		info.KRaftControllerEpoch = *raw.KRaftControllerEpoch
	}
	return info, nil
}

// EncodeControllerEpoch encodes /controller_epoch: the epoch in decimal.
func EncodeControllerEpoch(epoch int32) []byte { return []byte(strconv.Itoa(int(epoch))) }

// DecodeControllerEpoch decodes /controller_epoch.
func DecodeControllerEpoch(data []byte) (int32, error) {
	epoch, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 32)
	if err != nil {
		return 0, malformed(ControllerEpochPath, data, "not a 32-bit decimal integer")
	}
	if epoch < 0 {
		return 0, malformed(ControllerEpochPath, data, "negative controller epoch %d", epoch)
	}
	return int32(epoch), nil
}

// ---------------------------------------------------------------------------
// /brokers/ids/<id>

// Security protocols, as Kafka names them (SecurityProtocol.java).
var securityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// Endpoint is one advertised listener of a broker.
type Endpoint struct {
	Listener         string // listener name, e.g. PLAINTEXT or CLIENT
	SecurityProtocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	Host             string // "" is Kafka's null host (all interfaces)
	Port             int32
}

// ConnectionString is Kafka's EndPoint.connectionString: LISTENER://host:port,
// with an IPv6 host in brackets.
func (e Endpoint) ConnectionString() string {
	if e.Host == "" {
		return e.Listener + "://:" + strconv.Itoa(int(e.Port))
	}
	return e.Listener + "://" + net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
}

// VersionRange is one supported feature's range in a broker registration.
type VersionRange struct {
	Min int16 `json:"min_version"`
	Max int16 `json:"max_version"`
}

// BrokerInfo is a broker's registration, /brokers/ids/<id>.
type BrokerInfo struct {
	ID int32 // from the path, not the JSON
	// Version is the JSON version: EncodeBrokerInfo writes 5 (Kafka >= 2.7)
	// unless told 4; decoding accepts 1 to 5 and later ones as Kafka does.
	Version   int
	Endpoints []Endpoint
	Rack      string // "" when the broker has none
	JMXPort   int32  // -1 when JMX is off
	Timestamp int64  // registration time, Unix ms
	Features  map[string]VersionRange
	// Epoch is the znode's creation zxid, Kafka's broker epoch: it grows
	// with every registration. Filled in by Store reads; not in the JSON.
	Epoch int64
}

// Endpoint returns the endpoint of the named listener.
func (b BrokerInfo) Endpoint(listener string) (Endpoint, bool) {
	for _, e := range b.Endpoints {
		if e.Listener == listener {
			return e, true
		}
	}
	return Endpoint{}, false
}

// EncodeBrokerInfo encodes a registration as BrokerIdZNode.encode: the
// top-level host and port are the first PLAINTEXT endpoint's (null and -1
// without one), kept for old clients.
func EncodeBrokerInfo(b BrokerInfo) ([]byte, error) {
	version := b.Version
	if version == 0 {
		version = 5
	}
	if version != 4 && version != 5 {
		return nil, fmt.Errorf("encode %s: unsupported registration version %d (want 4 or 5)", BrokerIDPath(b.ID), version)
	}
	if len(b.Endpoints) == 0 {
		return nil, fmt.Errorf("encode %s: broker %d has no endpoints", BrokerIDPath(b.ID), b.ID)
	}
	var host any // nil encodes as null, Kafka's host for "no PLAINTEXT endpoint"
	port := int32(-1)
	protocols := map[string]string{}
	var protocolMap object
	endpoints := make([]string, 0, len(b.Endpoints))
	for _, e := range b.Endpoints {
		if !slices.Contains(securityProtocols, e.SecurityProtocol) {
			return nil, fmt.Errorf("encode %s: listener %s has unknown security protocol %q", BrokerIDPath(b.ID), e.Listener, e.SecurityProtocol)
		}
		if e.Listener == "" || strings.Contains(e.Listener, "://") {
			return nil, fmt.Errorf("encode %s: bad listener name %q", BrokerIDPath(b.ID), e.Listener)
		}
		if p, dup := protocols[e.Listener]; dup {
			return nil, fmt.Errorf("encode %s: listener %s appears twice (%s and %s)", BrokerIDPath(b.ID), e.Listener, p, e.SecurityProtocol)
		}
		protocols[e.Listener] = e.SecurityProtocol
		protocolMap.add(e.Listener, e.SecurityProtocol)
		endpoints = append(endpoints, e.ConnectionString())
		if e.SecurityProtocol == "PLAINTEXT" && port == -1 {
			if e.Host != "" {
				host = e.Host
			}
			port = e.Port
		}
	}
	var o object
	if version >= 5 {
		var features object
		for _, name := range slices.Sorted(maps.Keys(b.Features)) {
			features.add(name, b.Features[name])
		}
		o.addRaw("features", features.bytes())
	}
	o.addRaw("listener_security_protocol_map", protocolMap.bytes())
	o.add("endpoints", endpoints)
	if b.Rack != "" {
		o.add("rack", b.Rack)
	}
	o.add("jmx_port", b.JMXPort)
	o.add("port", port)
	o.add("host", host)
	o.add("version", version)
	o.add("timestamp", strconv.FormatInt(b.Timestamp, 10))
	return o.bytes(), nil
}

// DecodeBrokerInfo decodes /brokers/ids/<id> as BrokerIdZNode.decode.
func DecodeBrokerInfo(id int32, data []byte) (BrokerInfo, error) {
	path := BrokerIDPath(id)
	var raw struct {
		Version     *int              `json:"version"`
		Host        *string           `json:"host"`
		Port        *int32            `json:"port"`
		JMXPort     *int32            `json:"jmx_port"`
		Timestamp   *string           `json:"timestamp"`
		Endpoints   []string          `json:"endpoints"`
		Rack        *string           `json:"rack"`
		ProtocolMap map[string]string `json:"listener_security_protocol_map"`
		Features    map[string]struct {
			Min *int16 `json:"min_version"`
			Max *int16 `json:"max_version"`
		} `json:"features"`
	}
	if err := unmarshal(path, data, &raw); err != nil {
		return BrokerInfo{}, err
	}
	if raw.Version == nil {
		return BrokerInfo{}, malformed(path, data, `no "version"`)
	}
	b := BrokerInfo{ID: id, Version: *raw.Version, JMXPort: -1}
	if b.Version < 1 {
		return BrokerInfo{}, malformed(path, data, "unsupported registration version %d", b.Version)
	}
	if raw.JMXPort != nil {
		b.JMXPort = *raw.JMXPort
	}
	if raw.Timestamp != nil {
		ts, err := strconv.ParseInt(*raw.Timestamp, 10, 64)
		if err != nil {
			return BrokerInfo{}, malformed(path, data, "timestamp %q is not a decimal integer", *raw.Timestamp)
		}
		b.Timestamp = ts
	}
	if raw.Rack != nil {
		b.Rack = *raw.Rack
	}
	if b.Version == 1 {
		if raw.Host == nil || raw.Port == nil {
			return BrokerInfo{}, malformed(path, data, `version 1 needs "host" and "port"`)
		}
		b.Endpoints = []Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: *raw.Host, Port: *raw.Port}}
	} else {
		if len(raw.Endpoints) == 0 {
			return BrokerInfo{}, malformed(path, data, `no "endpoints"`)
		}
		protocols := raw.ProtocolMap
		if protocols == nil {
			// SocketServerConfigs.DEFAULT_NAME_TO_SECURITY_PROTO: every
			// protocol is a listener of its own name.
			protocols = map[string]string{}
			for _, p := range securityProtocols {
				protocols[p] = p
			}
		}
		for _, s := range raw.Endpoints {
			e, err := parseEndpoint(s, protocols)
			if err != nil {
				return BrokerInfo{}, malformed(path, data, "endpoint %q: %v", s, err)
			}
			if _, dup := b.Endpoint(e.Listener); dup {
				return BrokerInfo{}, malformed(path, data, "listener %s appears twice", e.Listener)
			}
			b.Endpoints = append(b.Endpoints, e)
		}
	}
	for name, r := range raw.Features {
		if r.Min == nil || r.Max == nil {
			return BrokerInfo{}, malformed(path, data, "feature %q needs min_version and max_version", name)
		}
		if b.Features == nil {
			b.Features = map[string]VersionRange{}
		}
		b.Features[name] = VersionRange{Min: *r.Min, Max: *r.Max}
	}
	return b, nil
}

// parseEndpoint parses LISTENER://host:port as Kafka's EndPoint
// (uriParseExp ^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)).
func parseEndpoint(s string, protocols map[string]string) (Endpoint, error) {
	listener, hostPort, ok := strings.Cut(s, "://")
	if !ok || listener == "" {
		return Endpoint{}, errors.New("want LISTENER://host:port")
	}
	i := strings.LastIndexByte(hostPort, ':')
	if i < 0 {
		return Endpoint{}, errors.New("no port")
	}
	host, portText := hostPort[:i], hostPort[i+1:]
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	for _, c := range host {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.ContainsRune("-%._:", c)) {
			return Endpoint{}, fmt.Errorf("bad host character %q", c)
		}
	}
	port, err := strconv.ParseInt(portText, 10, 32)
	if err != nil {
		return Endpoint{}, fmt.Errorf("bad port %q", portText)
	}
	protocol, ok := protocols[listener]
	if !ok {
		return Endpoint{}, fmt.Errorf("no security protocol defined for listener %s", listener)
	}
	if !slices.Contains(securityProtocols, protocol) {
		return Endpoint{}, fmt.Errorf("unknown security protocol %q for listener %s", protocol, listener)
	}
	return Endpoint{Listener: listener, SecurityProtocol: protocol, Host: host, Port: int32(port)}, nil
}

// ---------------------------------------------------------------------------
// /brokers/topics/<t>

// TopicID is a topic's UUID. Kafka prints it (Uuid.toString) as URL-safe
// base64 without padding, 22 characters.
type TopicID [16]byte

// String is Kafka's Uuid.toString.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// IsZero reports the zero id, which Kafka reserves for "no id".
func (id TopicID) IsZero() bool { return id == TopicID{} }

// ParseTopicID parses Kafka's Uuid.fromString form (padding optional).
func ParseTopicID(s string) (TopicID, error) {
	if len(s) > 24 {
		return TopicID{}, fmt.Errorf("topic id %q is too long to be a base64 UUID", s)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return TopicID{}, fmt.Errorf("topic id %q is not URL-safe base64: %v", s, err)
	}
	if len(raw) != 16 {
		return TopicID{}, fmt.Errorf("topic id %q decodes to %d bytes, not 16", s, len(raw))
	}
	return TopicID(raw), nil
}

// TopicAssignment is /brokers/topics/<t>: the topic id and each partition's
// replicas, plus the replicas a reassignment is adding or removing.
type TopicAssignment struct {
	ID               TopicID // zero when the znode has none (topics made before Kafka 2.8)
	Partitions       map[int32][]int32
	AddingReplicas   map[int32][]int32 // partitions with none are absent
	RemovingReplicas map[int32][]int32
}

// EncodeTopicAssignment encodes /brokers/topics/<t> as TopicZNode.encode
// (version 3): {"partitions":{"0":[1,2]},"topic_id":"...","adding_replicas":{},"removing_replicas":{},"version":3}.
func EncodeTopicAssignment(a TopicAssignment) []byte {
	var o object
	o.addRaw("partitions", partitionMap(a.Partitions))
	if !a.ID.IsZero() {
		o.add("topic_id", a.ID.String())
	}
	o.addRaw("adding_replicas", partitionMap(nonEmpty(a.AddingReplicas)))
	o.addRaw("removing_replicas", partitionMap(nonEmpty(a.RemovingReplicas)))
	o.add("version", 3)
	return o.bytes()
}

func nonEmpty(m map[int32][]int32) map[int32][]int32 {
	out := map[int32][]int32{}
	for p, r := range m {
		if len(r) > 0 {
			out[p] = r
		}
	}
	return out
}

// DecodeTopicAssignment decodes /brokers/topics/<t>, any version. Like
// Kafka, an empty znode is a topic with no partitions.
func DecodeTopicAssignment(topic string, data []byte) (TopicAssignment, error) {
	path := TopicPath(topic)
	a := TopicAssignment{Partitions: map[int32][]int32{}, AddingReplicas: map[int32][]int32{}, RemovingReplicas: map[int32][]int32{}}
	if len(bytes.TrimSpace(data)) == 0 {
		return a, nil
	}
	var raw struct {
		TopicID    *string            `json:"topic_id"`
		Partitions map[string][]int32 `json:"partitions"`
		Adding     map[string][]int32 `json:"adding_replicas"`
		Removing   map[string][]int32 `json:"removing_replicas"`
	}
	if err := unmarshal(path, data, &raw); err != nil {
		return TopicAssignment{}, err
	}
	if raw.TopicID != nil {
		id, err := ParseTopicID(*raw.TopicID)
		if err != nil {
			return TopicAssignment{}, malformed(path, data, "%v", err)
		}
		a.ID = id
	}
	for _, part := range []struct {
		name string
		in   map[string][]int32
		out  map[int32][]int32
	}{{"partitions", raw.Partitions, a.Partitions}, {"adding_replicas", raw.Adding, a.AddingReplicas}, {"removing_replicas", raw.Removing, a.RemovingReplicas}} {
		for key, replicas := range part.in {
			p, err := strconv.ParseInt(key, 10, 32)
			if err != nil || p < 0 {
				return TopicAssignment{}, malformed(path, data, "%s: %q is not a partition number", part.name, key)
			}
			if part.name == "partitions" && len(replicas) == 0 {
				return TopicAssignment{}, malformed(path, data, "partition %d has no replicas", p)
			}
			part.out[int32(p)] = replicas
		}
	}
	return a, nil
}

// ---------------------------------------------------------------------------
// /brokers/topics/<t>/partitions/<p>/state

// LeaderRecoveryState values (KIP-704).
const (
	LeaderRecovered  int8 = 0
	LeaderRecovering int8 = 1
)

// NoLeader is the leader of a partition without one.
const NoLeader int32 = -1

// PartitionState is /brokers/topics/<t>/partitions/<p>/state: Kafka's
// LeaderIsrAndControllerEpoch.
type PartitionState struct {
	Leader              int32
	LeaderEpoch         int32
	ISR                 []int32
	LeaderRecoveryState int8  // LeaderRecovered unless an unclean election is recovering
	ControllerEpoch     int32 // epoch of the controller that wrote it
	// ZkVersion is the state znode's version this state was read at (or
	// written as): Kafka's partitionEpoch, the condition of the next write.
	// Not in the JSON.
	ZkVersion int32
}

// EncodePartitionState encodes as TopicPartitionStateZNode.encode:
// {"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]},
// plus "leader_recovery_state" only when recovering.
func EncodePartitionState(s PartitionState) []byte {
	var o object
	o.add("controller_epoch", s.ControllerEpoch).add("leader", s.Leader).add("version", 1).add("leader_epoch", s.LeaderEpoch).addRaw("isr", int32List(s.ISR))
	if s.LeaderRecoveryState != LeaderRecovered {
		o.add("leader_recovery_state", s.LeaderRecoveryState)
	}
	return o.bytes()
}

// DecodePartitionState decodes a partition's state znode; zkVersion (the
// znode's version) becomes the state's ZkVersion.
func DecodePartitionState(topic string, partition int32, data []byte, zkVersion int32) (PartitionState, error) {
	path := PartitionStatePath(topic, partition)
	var raw struct {
		Leader          *int32  `json:"leader"`
		LeaderEpoch     *int32  `json:"leader_epoch"`
		ISR             []int32 `json:"isr"`
		ControllerEpoch *int32  `json:"controller_epoch"`
		Recovery        *int8   `json:"leader_recovery_state"`
	}
	if err := unmarshal(path, data, &raw); err != nil {
		return PartitionState{}, err
	}
	switch {
	case raw.Leader == nil:
		return PartitionState{}, malformed(path, data, `no "leader"`)
	case raw.LeaderEpoch == nil:
		return PartitionState{}, malformed(path, data, `no "leader_epoch"`)
	case raw.ISR == nil:
		return PartitionState{}, malformed(path, data, `no "isr"`)
	case raw.ControllerEpoch == nil:
		return PartitionState{}, malformed(path, data, `no "controller_epoch"`)
	}
	s := PartitionState{Leader: *raw.Leader, LeaderEpoch: *raw.LeaderEpoch, ISR: raw.ISR, ControllerEpoch: *raw.ControllerEpoch, ZkVersion: zkVersion}
	if raw.Recovery != nil {
		if *raw.Recovery != LeaderRecovered && *raw.Recovery != LeaderRecovering {
			return PartitionState{}, malformed(path, data, "unknown leader_recovery_state %d", *raw.Recovery)
		}
		s.LeaderRecoveryState = *raw.Recovery
	}
	return s, nil
}

// ---------------------------------------------------------------------------
// /config/topics/<t>

// EncodeTopicConfig encodes /config/topics/<t> as ConfigEntityZNode.encode:
// {"version":1,"config":{"retention.ms":"1000"}}.
func EncodeTopicConfig(configs map[string]string) []byte {
	var cfg object
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		cfg.add(k, configs[k])
	}
	var o object
	o.add("version", 1).addRaw("config", cfg.bytes())
	return o.bytes()
}

// DecodeTopicConfig decodes /config/topics/<t>. Like Kafka, an empty znode
// is an empty config.
func DecodeTopicConfig(topic string, data []byte) (map[string]string, error) {
	path := TopicConfigPath(topic)
	configs := map[string]string{}
	if len(bytes.TrimSpace(data)) == 0 {
		return configs, nil
	}
	var raw struct {
		Config map[string]*string `json:"config"`
	}
	if err := unmarshal(path, data, &raw); err != nil {
		return nil, err
	}
	for k, v := range raw.Config {
		if v == nil {
			return nil, malformed(path, data, "config %q is null", k)
		}
		configs[k] = *v
	}
	return configs, nil
}

// ---------------------------------------------------------------------------
// /isr_change_notification/isr_change_<seq>

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (tp TopicPartition) String() string { return tp.Topic + "-" + strconv.Itoa(int(tp.Partition)) }

// EncodeISRChangeNotification encodes a notification as
// IsrChangeNotificationSequenceZNode.encode:
// {"version":1,"partitions":[{"topic":"t","partition":0}]}.
func EncodeISRChangeNotification(partitions []TopicPartition) []byte {
	if partitions == nil {
		partitions = []TopicPartition{}
	}
	var o object
	o.add("version", 1).add("partitions", partitions)
	return o.bytes()
}

// DecodeISRChangeNotification decodes the notification at path.
func DecodeISRChangeNotification(path string, data []byte) ([]TopicPartition, error) {
	var raw struct {
		Partitions []struct {
			Topic     *string `json:"topic"`
			Partition *int32  `json:"partition"`
		} `json:"partitions"`
	}
	if err := unmarshal(path, data, &raw); err != nil {
		return nil, err
	}
	if raw.Partitions == nil {
		return nil, malformed(path, data, `no "partitions"`)
	}
	out := make([]TopicPartition, 0, len(raw.Partitions))
	for i, p := range raw.Partitions {
		if p.Topic == nil || p.Partition == nil {
			return nil, malformed(path, data, "partitions[%d] needs topic and partition", i)
		}
		out = append(out, TopicPartition{Topic: *p.Topic, Partition: *p.Partition})
	}
	return out, nil
}

// ---------------------------------------------------------------------------
// /cluster/id

// EncodeClusterID encodes /cluster/id as ClusterIdZNode.toJson; note the
// version is a string: {"version":"1","id":"..."}.
func EncodeClusterID(id string) []byte {
	var o object
	o.add("version", "1").add("id", id)
	return o.bytes()
}

// DecodeClusterID decodes /cluster/id.
func DecodeClusterID(data []byte) (string, error) {
	var raw struct {
		ID *string `json:"id"`
	}
	if err := unmarshal(ClusterIDPath, data, &raw); err != nil {
		return "", err
	}
	if raw.ID == nil || *raw.ID == "" {
		return "", malformed(ClusterIDPath, data, `no "id"`)
	}
	return *raw.ID, nil
}

// ---------------------------------------------------------------------------
// /latest_producer_id_block

// ProducerIDBlockSize is how many ids a block holds
// (ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
const ProducerIDBlockSize = 1000

// ProducerIDBlock is a range of producer ids handed to one broker.
type ProducerIDBlock struct {
	Broker int32
	First  int64 // first id of the block
	Last   int64 // last id of the block, inclusive
}

// EncodeProducerIDBlock encodes as ProducerIdBlockZNode.generateProducerIdBlockJson:
// {"version":1,"broker":1,"block_start":"0","block_end":"999"}.
func EncodeProducerIDBlock(b ProducerIDBlock) []byte {
	var o object
	o.add("version", 1).add("broker", b.Broker).add("block_start", strconv.FormatInt(b.First, 10)).add("block_end", strconv.FormatInt(b.Last, 10))
	return o.bytes()
}

// DecodeProducerIDBlock decodes /latest_producer_id_block.
func DecodeProducerIDBlock(data []byte) (ProducerIDBlock, error) {
	path := ProducerIDBlockPath
	var raw struct {
		Broker *int32  `json:"broker"`
		Start  *string `json:"block_start"`
		End    *string `json:"block_end"`
	}
	if err := unmarshal(path, data, &raw); err != nil {
		return ProducerIDBlock{}, err
	}
	if raw.Broker == nil || raw.Start == nil || raw.End == nil {
		return ProducerIDBlock{}, malformed(path, data, "needs broker, block_start and block_end")
	}
	first, err1 := strconv.ParseInt(*raw.Start, 10, 64)
	last, err2 := strconv.ParseInt(*raw.End, 10, 64)
	if err1 != nil || err2 != nil {
		return ProducerIDBlock{}, malformed(path, data, "block_start and block_end must be decimal 64-bit integers in strings")
	}
	if first < 0 || last < first || last-first >= math.MaxInt32 {
		return ProducerIDBlock{}, malformed(path, data, "bad block [%d, %d]", first, last)
	}
	return ProducerIDBlock{Broker: *raw.Broker, First: first, Last: last}, nil
}
