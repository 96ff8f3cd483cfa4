package controller

// Replicas in failed log dirs, as Kafka's controller treats them
// (ControllerContext.replicasOnOfflineDirs, KafkaController
// .onBrokerLogDirFailure): a replica whose broker is live but whose log dir
// failed is offline. It leaves the ISR, leadership moves to another ISR
// member, it may not join an ISR or be elected, and every view lists it in
// its partition's OfflineReplicas (UpdateMetadata and Metadata's
// offline_replicas).
//
// How the controller learns of them (Kafka asks the broker with
// LeaderAndIsr, which kbroker does not have; see zk/logdirs.go): the broker
// writes the replicas of its offline dirs to its ephemeral
// /kbroker/log_dir_failures/<id>, tagged with its broker epoch, then
// Kafka's /log_dir_event_notification/log_dir_event_<seq>. The controller,
// woken by the notification, reads the record, re-elects and publishes,
// and deletes the notification. A new controller reads the records of
// every live broker when it takes over. A record counts only while its
// broker epoch is the broker's registration: a broker restarted with its
// dir repaired is a new incarnation with no record, and its replicas
// return as ordinary followers. The embedded single node tells its own
// controller directly.

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/kbroker/kbroker/controller/zk"
)

// LogDirFailureReport is what a broker tells the controller of its failed
// log dirs: the dirs and every replica in them.
type LogDirFailureReport struct {
	LogDirs    []string
	Partitions []TopicPartition
}

// logDirStore is the part of the ZooKeeper store that carries log dir
// failures to the controller; the embedded node's local store has none.
type logDirStore interface {
	LogDirFailuresOf(ctx context.Context, id int32) (zk.LogDirFailures, bool, error)
	WatchLogDirEvents(ctx context.Context) (<-chan []string, error)
	LogDirEventBroker(ctx context.Context, name string) (int32, error)
	DeleteLogDirEvents(ctx context.Context, epochZkVersion int32, names []string) error
}

// logDirReporter is the broker's side of it (ZooKeeper membership).
type logDirReporter interface {
	ReportLogDirFailures(ctx context.Context, id int32, f zk.LogDirFailures) error
}

var (
	_ logDirStore    = (*zk.Store)(nil)
	_ logDirReporter = (*zk.Store)(nil)
)

// logDirReports is this broker's own report, kept to be written again
// with every registration (a new session loses the ephemeral record).
type logDirReports struct {
	// mu guards the fields and serialises the writes.
	mu sync.Mutex
	// brokerEpoch is this broker's registration; 0 before the first.
	brokerEpoch int64
	report      *LogDirFailureReport
}

// offlineDirReplicas are one broker's replicas in failed log dirs, as its
// record of brokerEpoch says.
type offlineDirReplicas struct {
	brokerEpoch int64
	replicas    map[TopicPartition]bool
}

// ReportLogDirFailure tells the controller that log dirs of this broker
// failed and which replicas were in them (every one so far, not only the
// last dir's). It is kept and written again after a re-registration.
func (c *Cluster) ReportLogDirFailure(ctx context.Context, r LogDirFailureReport) error {
	c.logDirs.mu.Lock()
	defer c.logDirs.mu.Unlock()
	r = LogDirFailureReport{LogDirs: slices.Clone(r.LogDirs), Partitions: slices.Clone(r.Partitions)}
	c.logDirs.report = &r
	if c.members == nil {
		// Embedded: the controller is this process.
		return c.withActive(func(a *active) error {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.setOfflineDirReplicasLocked(c.cfg.Self.ID, a.brokerEpochs[c.cfg.Self.ID], r.Partitions)
			ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
			defer cancel()
			return a.electAndPublishLocked(ctx)
		})
	}
	if c.logDirs.brokerEpoch == 0 {
		return nil // written once registered
	}
	return c.writeLogDirReportLocked(ctx)
}

// registeredLogDirs notes this broker's new registration and writes its
// report again under it, if it has one.
func (c *Cluster) registeredLogDirs(ctx context.Context, brokerEpoch int64) error {
	c.logDirs.mu.Lock()
	defer c.logDirs.mu.Unlock()
	c.logDirs.brokerEpoch = brokerEpoch
	if c.logDirs.report == nil {
		return nil
	}
	return c.writeLogDirReportLocked(ctx)
}

// writeLogDirReportLocked writes the report and the notification
// (logDirs.mu held).
func (c *Cluster) writeLogDirReportLocked(ctx context.Context) error {
	w, ok := c.members.(logDirReporter)
	if !ok {
		return errors.New("this cluster membership cannot report log dir failures")
	}
	r := c.logDirs.report
	f := zk.LogDirFailures{BrokerEpoch: c.logDirs.brokerEpoch, LogDirs: r.LogDirs}
	for _, tp := range r.Partitions {
		f.Partitions = append(f.Partitions, zk.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	if err := w.ReportLogDirFailures(ctx, c.cfg.Self.ID, f); err != nil {
		return err
	}
	c.logger.Info("told the controller of failed log dirs", "log_dirs", r.LogDirs, "replicas", len(r.Partitions), "broker_epoch", f.BrokerEpoch)
	return nil
}

// ---- the controller's side ----

// setOfflineDirReplicasLocked records broker id's replicas in failed log
// dirs as of its registration brokerEpoch (a.mu held).
func (a *active) setOfflineDirReplicasLocked(id int32, brokerEpoch int64, partitions []TopicPartition) {
	if a.offlineDirs == nil {
		a.offlineDirs = map[int32]*offlineDirReplicas{}
	}
	set := make(map[TopicPartition]bool, len(partitions))
	for _, tp := range partitions {
		set[tp] = true
	}
	a.offlineDirs[id] = &offlineDirReplicas{brokerEpoch: brokerEpoch, replicas: set}
	a.c.logger.Warn("replicas on failed log dirs are offline", "broker", id, "broker_epoch", brokerEpoch, "replicas", len(set))
}

// offlineDirsOfLocked is broker id's set of replicas in failed log dirs,
// nil when it has none or its record belongs to an earlier registration.
func (a *active) offlineDirsOfLocked(id int32) map[TopicPartition]bool {
	o := a.offlineDirs[id]
	if o == nil {
		return nil
	}
	if epoch, live := a.brokerEpochs[id]; !live || epoch != o.brokerEpoch {
		return nil
	}
	return o.replicas
}

// replicaPredicatesLocked narrows the broker predicates live and eligible
// (liveAndEligibleLocked's when nil) to one partition's replicas: a
// replica in a failed log dir is neither (Kafka's isReplicaOnline). They
// are returned as they are when no broker has such replicas.
func (a *active) replicaPredicatesLocked(topic string, partition int32, live, eligible func(int32) bool) (func(int32) bool, func(int32) bool) {
	if live == nil || eligible == nil {
		live, eligible = a.liveAndEligibleLocked()
	}
	if len(a.offlineDirs) == 0 {
		return live, eligible
	}
	tp := TopicPartition{Topic: topic, Partition: partition}
	online := func(id int32) bool { return !a.offlineDirsOfLocked(id)[tp] }
	return func(id int32) bool { return live(id) && online(id) },
		func(id int32) bool { return eligible(id) && online(id) }
}

// offlineDirReplicasOf lists the replicas of a partition that are in
// failed log dirs of live brokers, in assignment order; nil for none.
func offlineDirReplicasOf(ps PartitionState, topic string, partition int32, offline func(id int32) map[TopicPartition]bool) []int32 {
	var out []int32
	tp := TopicPartition{Topic: topic, Partition: partition}
	for _, r := range ps.Replicas {
		if offline(r)[tp] {
			out = append(out, r)
		}
	}
	return out
}

// markOfflineDirReplicasLocked sets every partition's OfflineReplicas in
// next to its replicas in failed log dirs (the view's brokers that are
// not live are added by whoever reads it).
func (a *active) markOfflineDirReplicasLocked(next *Metadata) {
	for _, t := range next.Topics {
		for p := range t.Partitions {
			t.Partitions[p].OfflineReplicas = nil
			if len(a.offlineDirs) > 0 {
				t.Partitions[p].OfflineReplicas = offlineDirReplicasOf(t.Partitions[p], t.Name, int32(p), a.offlineDirsOfLocked)
			}
		}
	}
}

// forgetOfflineDirsLocked drops the records of brokers that left or
// registered again (a restarted broker's replicas are online again until
// it says otherwise).
func (a *active) forgetOfflineDirsLocked() {
	for id, o := range a.offlineDirs {
		if epoch, live := a.brokerEpochs[id]; !live || epoch > o.brokerEpoch {
			delete(a.offlineDirs, id)
			a.c.logger.Info("broker re-registered or left: its replicas on failed log dirs are forgotten", "broker", id)
		}
	}
}

// loadOfflineDirsLocked reads the log dir failure records of the live
// brokers, when this controller takes over. A failure only logs: the
// brokers' next notification brings them again.
func (a *active) loadOfflineDirsLocked(ctx context.Context) {
	store, ok := a.c.store.(logDirStore)
	if !ok {
		return
	}
	for id := range a.brokerEpochs {
		a.readOfflineDirsLocked(ctx, store, id)
	}
}

// readOfflineDirsLocked reads broker id's record; it reports whether
// anything changed.
func (a *active) readOfflineDirsLocked(ctx context.Context, store logDirStore, id int32) bool {
	f, ok, err := store.LogDirFailuresOf(ctx, id)
	if err != nil {
		a.c.logger.Error("reading a broker's failed log dirs failed", "broker", id, "err", err)
		return false
	}
	if !ok {
		return false
	}
	if o := a.offlineDirs[id]; o != nil && o.brokerEpoch > f.BrokerEpoch {
		return false // a newer registration's record is known
	}
	parts := make([]TopicPartition, 0, len(f.Partitions))
	for _, tp := range f.Partitions {
		parts = append(parts, TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	a.setOfflineDirReplicasLocked(id, f.BrokerEpoch, parts)
	return true
}

// followLogDirEvents handles the log dir event notifications until the
// controller stops (Kafka's LogDirEventNotificationHandler).
func (a *active) followLogDirEvents() {
	defer a.wg.Done()
	store, ok := a.c.store.(logDirStore)
	if !ok {
		return
	}
	events, err := store.WatchLogDirEvents(a.ctx)
	if err != nil {
		if a.ctx.Err() == nil {
			a.c.logger.Error("watching log dir event notifications failed", "err", err)
		}
		return
	}
	for names := range events {
		a.onLogDirEvents(store, names)
	}
}

// onLogDirEvents reads the records of the brokers the notifications name,
// re-elects and publishes, then deletes the notifications (Kafka's
// processLogDirEventNotification).
func (a *active) onLogDirEvents(store logDirStore, names []string) {
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(a.ctx, controllerWriteTimeout)
	defer cancel()
	brokers := map[int32]bool{}
	for _, n := range names {
		id, err := store.LogDirEventBroker(ctx, n)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			a.c.logger.Error("reading a log dir event notification failed", "notification", n, "err", err)
			continue
		}
		brokers[id] = true
	}
	a.mu.Lock()
	changed := false
	for id := range brokers {
		if a.readOfflineDirsLocked(ctx, store, id) {
			changed = true
		}
	}
	if changed {
		if err := a.electAndPublishLocked(ctx); err != nil {
			a.c.logger.Error("re-electing after a log dir failure failed", "err", err)
		}
	}
	a.mu.Unlock()
	if err := store.DeleteLogDirEvents(ctx, a.epochZkVersion, names); err != nil && a.ctx.Err() == nil {
		a.c.logger.Warn("deleting handled log dir event notifications failed", "err", err)
	}
}
