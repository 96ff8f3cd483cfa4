package replica

// A log dir that fails takes only its own replicas offline, as Kafka's
// LogDirFailureChannel and ReplicaManager.handleLogDirFailure (KIP-112):
//
//   - any I/O error on a partition's log (append, roll, index, flush,
//     read) or on the dir's checkpoint files reports the dir failed
//     (reportDirFailure): it is marked offline at once, and once only;
//   - the failure handler (RunLogDirFailureHandler, Kafka's
//     LogDirFailureHandler thread) then stops every replica whose log is
//     in the dir: no longer hosted (closed, never deleted), its fetcher
//     and any move between dirs stopped, its log closed; it answers
//     KAFKA_STORAGE_ERROR (OfflineError) until the broker restarts, and
//     Replicas lists it so a deletion of its topic stays pending;
//   - Config.OnLogDirFailure is told, with every offline replica, so the
//     broker can tell the controller (which moves leadership away and
//     takes the replicas out of their ISRs), or stop when no dir is left
//     (Kafka halts then).
//
// The report and the handling are two steps because a failure is found
// under a partition's lock, and stopping partitions needs the manager's
// lock first (the lock order is Manager.mu before Partition.mu).
// dirFailures' own lock is a leaf: nothing else is taken under it.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"github.com/kbroker/kbroker/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrLogDirOffline marks the errors of replicas in an offline log dir (with
// kerr.KafkaStorageError): they are not served until the broker restarts.
var ErrLogDirOffline = errors.New("log directory is offline")

// LogDirFailure is what Config.OnLogDirFailure is told when a log dir
// goes offline.
type LogDirFailure struct {
	Dir string
	// Err is the failure that took Dir offline.
	Err error
	// Partitions are the replicas this failure took offline (open or only
	// on disk in Dir), sorted.
	Partitions []TopicPartition
	// OfflineDirs are every offline log dir (in configured order) and
	// OfflineReplicas every replica in them (sorted): what the controller
	// is to treat as offline on this broker.
	OfflineDirs     []string
	OfflineReplicas []TopicPartition
	// AllOffline: no log dir is left online, so the broker must stop.
	AllOffline bool
}

// dirFailures is Kafka's LogDirFailureChannel: the offline log dirs, each
// queued once for the failure handler.
type dirFailures struct {
	// mu guards offline and refused; a leaf lock.
	mu      sync.Mutex
	offline map[string]error
	// queue holds the dirs not handled yet; it has room for every dir.
	queue chan string
	// refused are the replicas refused since the failure handler last
	// told of them (refuseUnlistedLocked); refusedWake (capacity 1)
	// wakes the handler.
	refused     []TopicPartition
	refusedWake chan struct{}
}

func newDirFailures(dirs int) *dirFailures {
	return &dirFailures{offline: map[string]error{}, queue: make(chan string, dirs), refusedWake: make(chan struct{}, 1)}
}

// add marks dir offline with err; it reports false when it already was.
func (f *dirFailures) add(dir string, err error) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.offline[dir] != nil {
		return false
	}
	f.offline[dir] = err
	select {
	case f.queue <- dir:
	default: // cannot happen: each configured dir is queued once
	}
	return true
}

// err is the failure that took dir offline, nil when online.
func (f *dirFailures) err(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offline[dir]
}

// isLogDirFailure tells whether err, from an operation on a log or a log
// dir's files, means the dir failed (Kafka's IOException, which becomes a
// KafkaStorageException and takes the dir offline). Not failures: the log
// was closed under the operation (a deletion, a move, or the dir already
// offline), an append at an unexpected offset, the process or system out
// of file descriptors (retriable), a cancelled wait, and anything that is
// not the operating system's answer to a file operation (bad data read
// back is a corrupt record, not a failed disk).
func isLogDirFailure(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, segment.ErrClosed),
		errors.Is(err, segment.ErrUnexpectedOffset),
		errors.Is(err, errOutOfDescriptors),
		outOfDescriptors(err),
		errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.EINTR),
		errors.Is(err, syscall.EAGAIN):
		return false
	}
	var errno syscall.Errno
	var pathErr *fs.PathError
	var linkErr *os.LinkError
	return errors.As(err, &errno) || errors.As(err, &pathErr) || errors.As(err, &linkErr)
}

// reportDirFailure marks dir offline because of err and queues it for the
// failure handler; a dir already offline is left as it is. It takes no
// lock but dirFailures', so it may be called under any lock.
func (m *Manager) reportDirFailure(dir string, err error) {
	if !slices.Contains(m.dirs, dir) {
		// Not a log dir (a path this manager does not know): nothing to
		// take offline. Cannot happen for logs opened by the manager.
		m.logger.Error("I/O error outside the log dirs", "dir", dir, "err", err)
		return
	}
	if m.failures.add(dir, err) {
		m.logger.Error("log dir failed: taking it offline; its replicas stop, the others are served", "log_dir", dir, "err", err)
	}
}

// logDirFailed is a partition's report of a failed operation on its log in
// dir: OnStorageError is told, and the dir is reported failed.
func (m *Manager) logDirFailed(dir string, err error) {
	if m.cfg.OnStorageError != nil {
		m.cfg.OnStorageError(err)
	}
	m.reportDirFailure(dir, err)
}

// RunLogDirFailureHandler takes every reported dir offline
// (handleLogDirFailure), and tells of replicas refused because a dir was
// offline since the start (refuseUnlistedLocked), until ctx ends.
func (m *Manager) RunLogDirFailureHandler(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case dir := <-m.failures.queue:
			m.handleLogDirFailure(dir)
		case <-m.failures.refusedWake:
			m.tellRefused()
		}
	}
}

// refuseUnlistedLocked answers the open of tp, a replica no online log
// dir holds, while a dir offline since the start was never listed
// (m.mu held): its log may be there, so it is not created empty in
// another dir (Kafka's getOrCreateLog refuses a replica that is not new
// while a dir is offline, KAFKA_STORAGE_ERROR). It is taken to be in the
// first such dir, offline until the broker restarts, and the failure
// handler tells Config.OnLogDirFailure so that the controller moves its
// leadership and takes it out of its ISR. Unlike Kafka, which knows a
// replica the controller has just created (isNew), a new partition's
// replica here is refused too until the dir is back.
func (m *Manager) refuseUnlistedLocked(tp TopicPartition, topicID [16]byte) error {
	dir := m.unscanned[0]
	m.location[tp] = dir
	m.offlineReplicas[tp] = topicID
	m.failures.mu.Lock()
	m.failures.refused = append(m.failures.refused, tp)
	m.failures.mu.Unlock()
	select {
	case m.failures.refusedWake <- struct{}{}:
	default:
	}
	m.logger.Warn("replica not found in the online log dirs while a log dir is offline since the start: not created, offline",
		"partition", tp.String(), "offline_log_dir", dir)
	return offlineReplicaError(tp, dir, m.failures.err(dir))
}

// tellRefused tells Config.OnLogDirFailure of the replicas refused since
// the last call.
func (m *Manager) tellRefused() {
	m.failures.mu.Lock()
	refused := m.failures.refused
	m.failures.refused = nil
	m.failures.mu.Unlock()
	if len(refused) == 0 || m.cfg.OnLogDirFailure == nil {
		return
	}
	slices.SortFunc(refused, compareTopicPartitions)
	dir := m.unscanned[0]
	f := LogDirFailure{Dir: dir, Err: m.failures.err(dir), Partitions: refused}
	f.OfflineDirs, f.OfflineReplicas = m.OfflineLogDirs(), m.OfflineReplicas()
	f.AllOffline = len(f.OfflineDirs) == len(m.dirs)
	m.cfg.OnLogDirFailure(f)
}

// handleLogDirFailure stops serving every replica in dir, which failed:
// open ones are closed (their fetchers and moves stopped first), logs
// only on disk are no longer opened, moves into dir are cancelled, and
// all of them answer KAFKA_STORAGE_ERROR from now on. Then
// Config.OnLogDirFailure is told.
func (m *Manager) handleLogDirFailure(dir string) {
	cause := m.failures.err(dir)
	m.mu.Lock()
	var stopping []*Partition
	var taken []TopicPartition
	for tp, home := range m.location {
		if home != dir {
			continue
		}
		if _, known := m.offlineReplicas[tp]; known {
			continue
		}
		if p, ok := m.partitions[tp]; ok {
			delete(m.partitions, tp)
			stopping = append(stopping, p)
			m.offlineReplicas[tp] = p.topicID
		} else if id, ok := m.stored[tp]; ok {
			// Also a stored log being opened (open.go): its opener
			// finds it offline and closes it.
			delete(m.stored, tp)
			m.offlineReplicas[tp] = id
		} else if mark, ok := m.opening[tp]; ok {
			// A new log being created there: the same.
			m.offlineReplicas[tp] = mark.topicID
		} else {
			continue
		}
		delete(m.hwAtStart, tp)
		delete(m.resumeMoves, tp)
		taken = append(taken, tp)
	}
	var movesIn []TopicPartition
	for tp, mv := range m.moves {
		if mv.dest == dir {
			movesIn = append(movesIn, tp)
		}
	}
	for tp, dest := range m.resumeMoves {
		if dest == dir {
			delete(m.resumeMoves, tp)
		}
	}
	for tp, pref := range m.preferred {
		if pref == dir {
			delete(m.preferred, tp)
		}
	}
	m.mu.Unlock()

	// A replica whose future log was to go into dir stays where it is:
	// the move stops (Kafka's removeFutureLocalReplica).
	for _, tp := range movesIn {
		m.cancelMove(tp)
	}
	for _, p := range stopping {
		m.cancelMove(p.tp)
		p.mu.Lock()
		p.offline = true
		p.isLeader = false
		p.leaderID = -1
		p.notifyLocked()
		p.mu.Unlock()
		// After the role: no fetcher added later by a view that raced
		// with this finds the partition serving.
		m.fetchers.remove(p.tp)
		if err := p.log().Close(); err != nil {
			p.logger.Warn("closing the log of an offline log dir", "err", err)
		}
	}
	slices.SortFunc(taken, compareTopicPartitions)
	f := LogDirFailure{Dir: dir, Err: cause, Partitions: taken}
	f.OfflineDirs, f.OfflineReplicas = m.OfflineLogDirs(), m.OfflineReplicas()
	f.AllOffline = len(f.OfflineDirs) == len(m.dirs)
	m.logger.Error("log dir offline: stopped serving its replicas", "log_dir", dir, "replicas", len(taken),
		"offline_log_dirs", len(f.OfflineDirs), "log_dirs", len(m.dirs), "err", cause)
	if m.cfg.OnLogDirFailure != nil {
		m.cfg.OnLogDirFailure(f)
	}
}

// OfflineLogDirs lists the offline log dirs, in configured order.
func (m *Manager) OfflineLogDirs() []string {
	var out []string
	for _, d := range m.dirs {
		if m.failures.err(d) != nil {
			out = append(out, d)
		}
	}
	return out
}

// OfflineReplicas lists the replicas in offline log dirs, sorted.
func (m *Manager) OfflineReplicas() []TopicPartition {
	m.mu.RLock()
	out := make([]TopicPartition, 0, len(m.offlineReplicas))
	for tp := range m.offlineReplicas {
		out = append(out, tp)
	}
	m.mu.RUnlock()
	slices.SortFunc(out, compareTopicPartitions)
	return out
}

// OfflineError is KAFKA_STORAGE_ERROR (with ErrLogDirOffline) when tp's
// replica is in an offline log dir, else nil: Kafka's answer for a
// partition whose HostedPartition is Offline.
func (m *Manager) OfflineError(tp TopicPartition) error {
	m.mu.RLock()
	_, offline := m.offlineReplicas[tp]
	dir := m.location[tp]
	m.mu.RUnlock()
	if !offline {
		return nil
	}
	return offlineReplicaError(tp, dir, m.failures.err(dir))
}

// offlineReplicaError is the error of tp, whose log is in the offline dir.
func offlineReplicaError(tp TopicPartition, dir string, cause error) error {
	return fmt.Errorf("%w: %w: %s is in %s: %v", kerr.KafkaStorageError, ErrLogDirOffline, tp, dir, cause)
}

// offlineLocked reports tp's error when its log is in an offline dir
// (m.mu held): such a log is never opened again by this run.
func (m *Manager) offlineLocked(tp TopicPartition) error {
	if _, offline := m.offlineReplicas[tp]; offline {
		return offlineReplicaError(tp, m.location[tp], m.failures.err(m.location[tp]))
	}
	if dir, ok := m.location[tp]; ok {
		if err := m.failures.err(dir); err != nil {
			// Reported, not handled yet.
			return offlineReplicaError(tp, dir, err)
		}
	}
	return nil
}

// readFailed reports a failed read of p's log and returns
// KAFKA_STORAGE_ERROR when err is a failure of its dir (isLogDirFailure);
// a closed log answers NOT_LEADER_OR_FOLLOWER (closedAsNotLeader), other
// errors come back as they are.
func (p *Partition) readFailed(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, segment.ErrClosed) {
		return closedAsNotLeader(err)
	}
	if !isLogDirFailure(err) {
		return err
	}
	if p.logDirFailed != nil {
		p.logDirFailed(filepath.Dir(p.log().Dir()), err)
	}
	return fmt.Errorf("%w: %w", kerr.KafkaStorageError, err)
}

func compareTopicPartitions(a, b TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}
