package replica

// JBOD: every directory of log.dirs holds partition logs, as Kafka's
// LogManager. Each log lives in one dir; a new one goes to the dir with the
// fewest logs (nextLogDir). Each dir has its own clean-shutdown marker,
// replication-offset-checkpoint, cleaner-offset-checkpoint and
// meta.properties, so a dir moved to another broker (or lost) carries its
// own state with it.

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kbroker/kbroker/internal/atomicfile"
)

// futureSuffix ends the name of a future log: the copy of a replica being
// moved to another log dir (AlterReplicaLogDirs), Kafka's
// "<topic>-<partition>.<uniqueId>-future".
const futureSuffix = "-future"

// maxLogDirNameLength is the longest file name Kafka allows for a future
// log directory (KAFKA-4893): a longer topic cannot be moved.
const maxLogDirNameLength = 255

// resolveLogDirs returns the configured log dirs as absolute, cleaned
// paths in their configured order: Config.LogDirs, else Config.LogDir. A
// dir named twice is refused, as Kafka does.
func resolveLogDirs(cfg Config) ([]string, error) {
	raw := cfg.LogDirs
	if len(raw) == 0 {
		raw = []string{cfg.LogDir}
	}
	var out []string
	for _, d := range raw {
		if strings.TrimSpace(d) == "" {
			return nil, errors.New("log.dirs: empty directory name")
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("log.dirs: %s: %w", d, err)
		}
		if slices.Contains(out, abs) {
			return nil, fmt.Errorf("log.dirs: duplicate log directory found: %s", abs)
		}
		out = append(out, abs)
	}
	return out, nil
}

// nextLogDir is the head of Kafka's LogManager.nextLogDirs: of the usable
// dirs, the one holding the fewest partition logs (counts; future logs
// included), the first configured on a tie. "" when no dir is usable.
func nextLogDir(dirs []string, counts map[string]int, usable func(string) bool) string {
	best := ""
	for _, d := range dirs {
		if usable != nil && !usable(d) {
			continue
		}
		if best == "" || counts[d] < counts[best] {
			best = d
		}
	}
	return best
}

// futureDirName is the name of tp's future log with a unique id (32 hex
// digits, as Kafka's UUID without dashes).
func futureDirName(tp TopicPartition, id string) string {
	return tp.String() + "." + id + futureSuffix
}

// futureDirNameLength is the length of any future log dir name of tp.
func futureDirNameLength(tp TopicPartition) int {
	return len(futureDirName(tp, strings.Repeat("0", 32)))
}

// parseFutureDir splits a future log directory name,
// "<topic>-<partition>.<id>-future", reporting false for anything else.
func parseFutureDir(name string) (TopicPartition, bool) {
	rest, ok := strings.CutSuffix(name, futureSuffix)
	if !ok {
		return TopicPartition{}, false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 || i == len(rest)-1 {
		return TopicPartition{}, false
	}
	return parsePartitionDir(rest[:i])
}

// ---- meta.properties ----

// metaPropertiesFile is Kafka's per-log-dir identity file. A ZooKeeper
// broker writes version 0 with its broker.id and the cluster.id.
const metaPropertiesFile = "meta.properties"

// metaProperties is what a meta.properties file says; absent fields are
// empty (BrokerID -1).
type metaProperties struct {
	Version   int
	BrokerID  int32
	ClusterID string
}

// parseProperties reads a Java properties file's simple form: "key=value",
// "key: value" or "key value" lines, '#' and '!' comments, surrounding
// blanks ignored. Escapes and continuation lines, which meta.properties
// never holds, are not interpreted.
func parseProperties(data string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=: \t")
		if i < 0 {
			out[line] = ""
			continue
		}
		key := line[:i]
		val := strings.TrimLeft(line[i:], " \t")
		if val != "" && (val[0] == '=' || val[0] == ':') {
			val = strings.TrimLeft(val[1:], " \t")
		}
		out[key] = val
	}
	return out
}

// parseMetaProperties reads a meta.properties file's content. A missing
// version is 0 (Kafka: implicit); numbers that do not parse are errors.
func parseMetaProperties(data string) (metaProperties, error) {
	props := parseProperties(data)
	mp := metaProperties{BrokerID: -1, ClusterID: props["cluster.id"]}
	if v, ok := props["version"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return mp, fmt.Errorf("version %q is not a number", v)
		}
		mp.Version = n
	}
	id, ok := props["broker.id"]
	if !ok {
		id, ok = props["node.id"]
	}
	if ok {
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil || n < 0 {
			return mp, fmt.Errorf("broker.id %q is not a broker id", id)
		}
		mp.BrokerID = int32(n)
	}
	return mp, nil
}

// formatMetaProperties is the version 0 file a ZooKeeper broker writes.
func formatMetaProperties(brokerID int32, clusterID string, now time.Time) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "#\n#%s\n", now.UTC().Format("Mon Jan 02 15:04:05 MST 2006"))
	fmt.Fprintf(&b, "version=0\nbroker.id=%d\n", brokerID)
	if clusterID != "" {
		fmt.Fprintf(&b, "cluster.id=%s\n", clusterID)
	}
	return []byte(b.String())
}

// checkMetaProperties is Kafka's MetaPropertiesEnsemble.verify for a
// ZooKeeper broker that is not migrating: version 0 only; the broker.id
// stored must be the configured one (InconsistentBrokerIdException: a
// misconfigured broker would otherwise take, and delete, another broker's
// replicas); with clusterID set, the stored cluster.id must be it (a
// broker pointed at another cluster's ZooKeeper).
func checkMetaProperties(path string, mp metaProperties, brokerID int32, clusterID string) error {
	if mp.Version != 0 {
		return fmt.Errorf("found unexpected version %d in %s: ZooKeeper-based brokers only support version 0", mp.Version, path)
	}
	if mp.BrokerID >= 0 && mp.BrokerID != brokerID {
		return fmt.Errorf("configured broker.id %d doesn't match stored broker.id %d in %s. If you moved your data, "+
			"make sure your configured broker.id matches. If you intend to create a new broker, you should remove "+
			"all data in your data directories (log.dirs)", brokerID, mp.BrokerID, path)
	}
	if clusterID != "" && mp.ClusterID != "" && mp.ClusterID != clusterID {
		return fmt.Errorf("the cluster ID %s doesn't match stored cluster.id %s in %s. The broker is trying to join "+
			"the wrong cluster: zookeeper.connect may be wrong", clusterID, mp.ClusterID, path)
	}
	return nil
}

// readMetaProperties reads dir's meta.properties; ok is false when there
// is none.
func readMetaProperties(dir string) (mp metaProperties, ok bool, err error) {
	path := filepath.Join(dir, metaPropertiesFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return metaProperties{BrokerID: -1}, false, nil
	}
	if err != nil {
		return mp, false, fmt.Errorf("read %s: %w", path, err)
	}
	mp, err = parseMetaProperties(string(data))
	if err != nil {
		return mp, false, fmt.Errorf("%s: %w", path, err)
	}
	return mp, true, nil
}

// WriteMetaProperties checks and writes meta.properties in every log dir
// once the cluster id is known: on a ZooKeeper broker a dir of another
// cluster stops the start; on the embedded single node the files are
// rewritten with this broker's id (a changed broker.id takes the replicas
// over there). Unchanged files are not rewritten.
func (m *Manager) WriteMetaProperties(clusterID string) error {
	for _, dir := range m.dirs {
		if !m.dirUsable(dir) {
			continue
		}
		path := filepath.Join(dir, metaPropertiesFile)
		mp, ok, err := readMetaProperties(dir)
		if err != nil && m.cfg.EnforceBrokerID {
			return err
		}
		if ok && m.cfg.EnforceBrokerID {
			if err := checkMetaProperties(path, mp, m.cfg.BrokerID, clusterID); err != nil {
				return err
			}
		}
		if ok && mp.Version == 0 && mp.BrokerID == m.cfg.BrokerID && mp.ClusterID == clusterID {
			continue
		}
		if err := atomicfile.Write(path, formatMetaProperties(m.cfg.BrokerID, clusterID, time.Now())); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}

// ---- per-dir offset checkpoints ----

// readDirCheckpoints reads the checkpoint file name (Kafka's
// OffsetCheckpointFile format) of every log dir. For a partition named in
// several (a crash right after a replica moved), the file of the dir its
// log is in wins.
func (m *Manager) readDirCheckpoints(name string) (map[TopicPartition]int64, error) {
	out := map[TopicPartition]int64{}
	var errs []error
	fromHome := map[TopicPartition]bool{}
	for _, dir := range m.dirs {
		if !m.dirUsable(dir) {
			continue
		}
		offsets, err := readPartitionOffsets(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", dir, err))
			continue
		}
		m.mu.RLock()
		for tp, off := range offsets {
			home := m.location[tp] == dir
			if _, seen := out[tp]; !seen || (home && !fromHome[tp]) {
				out[tp] = off
				fromHome[tp] = home
			}
		}
		m.mu.RUnlock()
	}
	return out, errors.Join(errs...)
}

// writeDirCheckpoints writes offsets to the checkpoint file name of each
// log dir, every partition to the dir its log is in; every dir gets a
// file, so one a partition left is rewritten without it.
func (m *Manager) writeDirCheckpoints(name string, offsets map[TopicPartition]int64) error {
	m.checkpointMu.Lock()
	defer m.checkpointMu.Unlock()
	byDir := map[string]map[TopicPartition]int64{}
	for _, dir := range m.dirs {
		byDir[dir] = map[TopicPartition]int64{}
	}
	m.mu.RLock()
	for tp, off := range offsets {
		if dir, ok := m.location[tp]; ok && byDir[dir] != nil {
			byDir[dir][tp] = off
		}
	}
	m.mu.RUnlock()
	var errs []error
	for _, dir := range slices.Sorted(maps.Keys(byDir)) {
		if !m.dirUsable(dir) {
			continue
		}
		if err := writePartitionOffsets(filepath.Join(dir, name), byDir[dir]); err != nil {
			errs = append(errs, err)
			if isLogDirFailure(err) {
				// Kafka's OffsetCheckpointFile takes the dir offline
				// when a checkpoint cannot be written.
				m.reportDirFailure(dir, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ---- DescribeLogDirs ----

// LogDirInfo is one log dir as DescribeLogDirs reports it.
type LogDirInfo struct {
	Dir string
	// Err is set for an offline dir (KAFKA_STORAGE_ERROR).
	Err error
	// TotalBytes and UsableBytes are the file system's size and the
	// space this broker may still use there; -1 when unknown.
	TotalBytes, UsableBytes int64
	Logs                    []LogInfo
}

// LogInfo is one partition log in a log dir.
type LogInfo struct {
	TopicPartition
	// Size is the bytes of its segment files.
	Size int64
	// OffsetLag: for the current replica how far its log end is below
	// the high watermark (0 for a leader); for a future replica how far
	// it is behind the current one; -1 for a log no view has opened.
	OffsetLag int64
	IsFuture  bool
}

// DescribeLogDirs lists every log dir with the partition logs in it, as
// Kafka's ReplicaManager.describeLogDirs.
func (m *Manager) DescribeLogDirs() []LogDirInfo {
	byDir := map[string][]LogInfo{}
	for _, p := range m.All() {
		st := p.State()
		l := p.log()
		byDir[filepath.Dir(l.Dir())] = append(byDir[filepath.Dir(l.Dir())], LogInfo{
			TopicPartition: p.tp,
			Size:           l.Size(),
			OffsetLag:      max(st.HighWatermark-st.LogEndOffset, 0),
		})
	}
	m.mu.RLock()
	stored := make(map[TopicPartition]string, len(m.stored))
	for tp := range m.stored {
		stored[tp] = m.location[tp]
	}
	moves := slices.Collect(maps.Values(m.moves))
	m.mu.RUnlock()
	for tp, dir := range stored {
		byDir[dir] = append(byDir[dir], LogInfo{TopicPartition: tp, Size: segmentFilesSize(filepath.Join(dir, tp.String())), OffsetLag: -1})
	}
	for _, mv := range moves {
		future := mv.futureLog()
		if future == nil {
			continue
		}
		lag := int64(-1)
		if p, ok := m.Get(mv.tp); ok {
			lag = max(p.log().EndOffset()-future.EndOffset(), 0)
		}
		byDir[mv.dest] = append(byDir[mv.dest], LogInfo{TopicPartition: mv.tp, Size: future.Size(), OffsetLag: lag, IsFuture: true})
	}
	out := make([]LogDirInfo, 0, len(m.dirs))
	for _, dir := range m.dirs {
		info := LogDirInfo{Dir: dir, TotalBytes: -1, UsableBytes: -1}
		if err := m.dirError(dir); err != nil {
			info.Err = err
			out = append(out, info)
			continue
		}
		info.TotalBytes, info.UsableBytes = diskSpace(dir)
		info.Logs = byDir[dir]
		slices.SortFunc(info.Logs, func(a, b LogInfo) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), boolCompare(a.IsFuture, b.IsFuture))
		})
		out = append(out, info)
	}
	return out
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// segmentFilesSize is the bytes of the .log files in a partition dir, as
// Kafka's log size; 0 when unreadable.
func segmentFilesSize(dir string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		if info, err := e.Info(); err == nil {
			n += info.Size()
		}
	}
	return n
}

// diskSpace is the total and usable bytes of the file system holding dir
// (Java's FileStore getTotalSpace and getUsableSpace); -1 when unknown.
func diskSpace(dir string) (total, usable int64) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	bs := uint64(st.Frsize)
	if bs == 0 {
		bs = uint64(st.Bsize)
	}
	return clampInt64(st.Blocks * bs), clampInt64(st.Bavail * bs)
}

// clampInt64 is Kafka's adjustForLargeFileSystems: a size past int64 is
// reported as the largest int64.
func clampInt64(v uint64) int64 {
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}
