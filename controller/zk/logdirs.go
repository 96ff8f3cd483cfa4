package zk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	gozk "github.com/go-zookeeper/zk"
)

// Log dir failures. A Kafka broker whose log dir fails writes a
// notification (KafkaZkClient.propagateLogDirEvent):
//
//	/log_dir_event_notification/log_dir_event_<seq>   {"version":1,"broker":<id>,"event":1}
//
// and the controller, woken by it, sends the broker LeaderAndIsr for all
// its replicas to learn from the answers (KAFKA_STORAGE_ERROR) which ones
// are offline. kbroker has no LeaderAndIsr, so the broker states its
// offline replicas itself, in an ephemeral znode of its session, before it
// writes Kafka's notification:
//
//	/kbroker/log_dir_failures/<id>   {"version":1,"broker_epoch":<czxid of /brokers/ids/<id>>,
//	                                  "log_dirs":["/data/2"],"partitions":[{"topic":"t","partition":0}]}
//
// The controller reads it on the notification (and when it takes over, and
// when the broker re-registers) and treats the replicas it names as
// offline (Kafka's replicasOnOfflineDirs) while the broker epoch matches
// the broker's registration: a broker restarted with its dir repaired has
// a new epoch and no such znode, so its replicas are online again. Kafka's
// tools ignore the kbroker znode; the notification is Kafka's, byte for
// byte.

// Paths of log dir failures.
const (
	LogDirEventSequencePrefix = "log_dir_event_"
	LogDirFailuresPath        = "/kbroker/log_dir_failures"
	// logDirFailureEvent is Kafka's LogDirFailureEvent.
	logDirFailureEvent = 1
)

// LogDirEventPath is /log_dir_event_notification/<name>.
func LogDirEventPath(name string) string { return LogDirEventNotificationPath + "/" + name }

// LogDirFailuresOfPath is /kbroker/log_dir_failures/<id>.
func LogDirFailuresOfPath(id int32) string { return LogDirFailuresPath + "/" + strconv.Itoa(int(id)) }

// EncodeLogDirEventNotification encodes Kafka's
// LogDirEventNotificationSequenceZNode: {"version":1,"broker":1,"event":1}.
func EncodeLogDirEventNotification(brokerID int32) []byte {
	var o object
	o.add("version", 1).add("broker", brokerID).add("event", logDirFailureEvent)
	return o.bytes()
}

// DecodeLogDirEventNotification returns the broker a notification at path
// names.
func DecodeLogDirEventNotification(path string, data []byte) (int32, error) {
	var raw struct {
		Version *int   `json:"version"`
		Broker  *int32 `json:"broker"`
	}
	if err := unmarshal(path, data, &raw); err != nil {
		return -1, err
	}
	if raw.Version == nil || *raw.Version != 1 || raw.Broker == nil || *raw.Broker < 0 {
		return -1, malformed(path, data, `want version 1 and a "broker"`)
	}
	return *raw.Broker, nil
}

// LogDirFailures is what a broker says of its offline log dirs.
type LogDirFailures struct {
	// BrokerEpoch is the broker's registration (czxid of
	// /brokers/ids/<id>) the record belongs to.
	BrokerEpoch int64
	LogDirs     []string
	// Partitions are the replicas in those dirs.
	Partitions []TopicPartition
}

// EncodeLogDirFailures encodes a broker's record, partitions sorted.
func EncodeLogDirFailures(f LogDirFailures) []byte {
	parts := slices.Clone(f.Partitions)
	slices.SortFunc(parts, func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	dirs := f.LogDirs
	if dirs == nil {
		dirs = []string{}
	}
	if parts == nil {
		parts = []TopicPartition{}
	}
	var o object
	o.add("version", 1).add("broker_epoch", f.BrokerEpoch).add("log_dirs", dirs).add("partitions", parts)
	return o.bytes()
}

// DecodeLogDirFailures decodes the record at path.
func DecodeLogDirFailures(path string, data []byte) (LogDirFailures, error) {
	var raw struct {
		Version     *int             `json:"version"`
		BrokerEpoch *int64           `json:"broker_epoch"`
		LogDirs     []string         `json:"log_dirs"`
		Partitions  []TopicPartition `json:"partitions"`
	}
	if err := unmarshal(path, data, &raw); err != nil {
		return LogDirFailures{}, err
	}
	if raw.Version == nil || *raw.Version != 1 || raw.BrokerEpoch == nil {
		return LogDirFailures{}, malformed(path, data, `want version 1 and a "broker_epoch"`)
	}
	return LogDirFailures{BrokerEpoch: *raw.BrokerEpoch, LogDirs: raw.LogDirs, Partitions: raw.Partitions}, nil
}

// ReportLogDirFailures writes broker id's record of its offline log dirs
// (ephemeral, this session's; replaced if there) and then Kafka's log dir
// event notification, so the controller reads the record.
func (s *Store) ReportLogDirFailures(ctx context.Context, id int32, f LogDirFailures) error {
	path := LogDirFailuresOfPath(id)
	data := EncodeLogDirFailures(f)
	if err := s.createParents(ctx, s.abs(path)); err != nil {
		return fmt.Errorf("create %s: %w", s.abs(LogDirFailuresPath), err)
	}
	for attempt := 0; ; attempt++ {
		if attempt == 10 {
			return fmt.Errorf("write %s: it keeps appearing and vanishing", s.abs(path))
		}
		_, err := s.multi(ctx, s.createOp(path, data, gozk.FlagEphemeral))
		if err == nil {
			break
		}
		if !errors.Is(err, gozk.ErrNodeExists) {
			return fmt.Errorf("write %s: %w", s.abs(path), err)
		}
		_, stat, err := s.get(ctx, path)
		if errors.Is(err, ErrNoNode) {
			continue
		}
		if err != nil {
			return err
		}
		if stat.EphemeralOwner != s.SessionID() {
			// Left by this broker's previous session (not yet expired
			// on the server) or by a process with the same broker.id
			// that is gone: the broker epoch inside tells the
			// controller which incarnation it is about. Replace it.
			err := s.retry(ctx, func() error { return s.conn.Delete(s.abs(path), stat.Version) })
			if err != nil && !errors.Is(err, gozk.ErrNoNode) && !errors.Is(err, gozk.ErrBadVersion) {
				return fmt.Errorf("replace %s: %w", s.abs(path), err)
			}
			continue
		}
		if _, err := s.multi(ctx, s.setOp(path, data, stat.Version)); err != nil {
			if errors.Is(err, gozk.ErrBadVersion) || errors.Is(err, gozk.ErrNoNode) {
				continue
			}
			return fmt.Errorf("write %s: %w", s.abs(path), err)
		}
		break
	}
	seqPath := LogDirEventPath(LogDirEventSequencePrefix)
	err := s.retry(ctx, func() error {
		_, err := s.conn.Create(s.abs(seqPath), EncodeLogDirEventNotification(id), gozk.FlagSequence, acl)
		return err
	})
	if errors.Is(err, gozk.ErrNoNode) {
		// The parent was deleted by hand: Kafka's brokers create it at
		// startup; so does this.
		if err = s.createParents(ctx, s.abs(seqPath)); err == nil {
			err = s.retry(ctx, func() error {
				_, err := s.conn.Create(s.abs(seqPath), EncodeLogDirEventNotification(id), gozk.FlagSequence, acl)
				return err
			})
		}
	}
	if err != nil {
		return fmt.Errorf("write log dir event notification: %w", err)
	}
	return nil
}

// LogDirFailuresOf reads broker id's record; ok is false when it has none.
func (s *Store) LogDirFailuresOf(ctx context.Context, id int32) (f LogDirFailures, ok bool, err error) {
	path := LogDirFailuresOfPath(id)
	data, _, err := s.get(ctx, path)
	if errors.Is(err, ErrNoNode) {
		return LogDirFailures{}, false, nil
	}
	if err != nil {
		return LogDirFailures{}, false, err
	}
	f, err = DecodeLogDirFailures(path, data)
	if err != nil {
		return LogDirFailures{}, false, s.malformedAt(err)
	}
	return f, true, nil
}

// WatchLogDirEvents delivers the names of the notifications under
// /log_dir_event_notification, sorted, now and after every change of its
// children (Kafka's LogDirEventNotificationHandler), until ctx ends.
func (s *Store) WatchLogDirEvents(ctx context.Context) (<-chan []string, error) {
	return watchLoop(ctx, s, func() ([]string, <-chan gozk.Event, error) {
		names, _, ev, err := s.conn.ChildrenW(s.abs(LogDirEventNotificationPath))
		if errors.Is(err, gozk.ErrNoNode) {
			if _, cerr := s.conn.Create(s.abs(LogDirEventNotificationPath), nil, 0, acl); cerr != nil && !errors.Is(cerr, gozk.ErrNodeExists) {
				return nil, nil, cerr
			}
			names, _, ev, err = s.conn.ChildrenW(s.abs(LogDirEventNotificationPath))
		}
		if err != nil {
			return nil, nil, err
		}
		slices.Sort(names)
		return names, ev, nil
	}, slices.Equal)
}

// LogDirEventBroker reads one notification: the broker it names.
// ErrNoNode if it was deleted meanwhile.
func (s *Store) LogDirEventBroker(ctx context.Context, name string) (int32, error) {
	path := LogDirEventPath(name)
	data, _, err := s.get(ctx, path)
	if err != nil {
		return -1, err
	}
	id, err := DecodeLogDirEventNotification(path, data)
	return id, s.malformedAt(err)
}

// DeleteLogDirEvents removes handled notifications, fenced on the
// controller epoch (KafkaZkClient.deleteLogDirEventNotifications); ones
// already gone are fine.
func (s *Store) DeleteLogDirEvents(ctx context.Context, epochZkVersion int32, names []string) error {
	for _, n := range names {
		_, err := s.fencedMulti(ctx, epochZkVersion, s.deleteOp(LogDirEventPath(n), -1))
		if err != nil && !errors.Is(err, gozk.ErrNoNode) {
			return fmt.Errorf("delete log dir event notification %s: %w", n, err)
		}
	}
	return nil
}
