package segment

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// SyncJournal is a TEST-ONLY record of what reached stable storage, for
// the power-loss test (kbroker.test.sync.journal). A test kills every
// broker with SIGKILL, which keeps the page cache, so everything written
// would survive; the journal tells it how much of each .log file an fsync
// had made durable, and the test cuts every file to that length before
// restarting: what a power cut at that moment would have left.
//
// One line per event, appended with O_APPEND and no fsync (the test kills
// processes, not the machine, so the page cache keeps the journal too):
//
//	create "<path>"                 the file was created or emptied (O_TRUNC)
//	trunc "<path>" <size>           the file was truncated to size
//	sync "<path>" <size> <since>    an fsync/fdatasync of the file succeeded;
//	                                size was taken before it began, so at
//	                                least that much is durable, and since is
//	                                the number of journal lines written when
//	                                it began (cuts after that line bound it)
//	rename "<from>" "<to>"          the file was renamed
//	delete "<path>"                 the file was removed
//
// Only files holding batches are journaled: .log segments and the
// cleaner's .log.cleaned/.log.swap/.log.deleted. A nil *SyncJournal
// records nothing and costs a nil check (the default).
type SyncJournal struct {
	mu    sync.Mutex
	f     *os.File
	lines uint64 // lines in the file, including those of earlier runs
}

// OpenSyncJournal opens (creating it if needed) the journal at path for
// appending. Lines already there (an earlier run of the broker, or the
// baseline a test wrote after a simulated crash) are counted, so the
// since fields of new sync lines are positions in the whole file.
func OpenSyncJournal(path string) (*SyncJournal, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read sync journal: %w", err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return nil, fmt.Errorf("sync journal %s: last line is incomplete", path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open sync journal: %w", err)
	}
	return &SyncJournal{f: f, lines: uint64(bytes.Count(data, []byte{'\n'}))}, nil
}

// Close closes the journal file.
func (j *SyncJournal) Close() error {
	if j == nil {
		return nil
	}
	return j.f.Close()
}

// journaled reports whether path holds batches, the only files the
// journal follows.
func journaled(path string) bool {
	return strings.Contains(filepath.Base(path), logSuffix)
}

// appendLine writes one event line (without its newline). Write errors are
// ignored: the journal is a test aid, and a test that misses lines finds
// files longer or shorter than the journal says and reports them.
func (j *SyncJournal) appendLine(line string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.appendLineLocked(line)
}

func (j *SyncJournal) appendLineLocked(line string) {
	if _, err := j.f.WriteString(line + "\n"); err == nil {
		j.lines++
	}
}

func (j *SyncJournal) created(path string) {
	if j != nil && journaled(path) {
		j.appendLine("create " + strconv.Quote(path))
	}
}

func (j *SyncJournal) truncated(path string, size int64) {
	if j != nil && journaled(path) {
		j.appendLine(fmt.Sprintf("trunc %s %d", strconv.Quote(path), size))
	}
}

func (j *SyncJournal) renamed(from, to string) {
	if j != nil && (journaled(from) || journaled(to)) {
		j.appendLine(fmt.Sprintf("rename %s %s", strconv.Quote(from), strconv.Quote(to)))
	}
}

func (j *SyncJournal) removed(path string) {
	if j != nil && journaled(path) {
		j.appendLine("delete " + strconv.Quote(path))
	}
}

// rename is os.Rename, journaled.
func (j *SyncJournal) rename(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	j.renamed(from, to)
	return nil
}

// syncFile runs syncFn (an fsync or fdatasync) on f and journals the size
// f had before it began. The line is written only if f.Name() still names
// f's file afterwards: a sync of a segment deleted or renamed meanwhile
// says nothing about the file now at that path.
func (j *SyncJournal) syncFile(f *os.File, syncFn func(*os.File) error) error {
	if j == nil || !journaled(f.Name()) {
		return syncFn(f)
	}
	j.mu.Lock()
	since := j.lines
	j.mu.Unlock()
	before, statErr := f.Stat()
	if err := syncFn(f); err != nil {
		return err
	}
	if statErr != nil {
		return nil // a closed descriptor: nothing is claimed
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	// Under mu: a rename or removal recorded after this check comes after
	// this line; one done before it fails the check.
	if now, err := os.Stat(f.Name()); err == nil && os.SameFile(before, now) {
		j.appendLineLocked(fmt.Sprintf("sync %s %d %d", strconv.Quote(f.Name()), before.Size(), since))
	}
	return nil
}

// fileSync is (*os.File).Sync as a syncFile argument.
func fileSync(f *os.File) error { return f.Sync() }

// SyncEvent is one parsed journal line.
type SyncEvent struct {
	Op    string // create, trunc, sync, rename, delete
	Path  string
	To    string // rename's new name
	Size  int64  // trunc, sync
	Since uint64 // sync: lines in the journal when the sync began
}

// ReadSyncJournal parses the journal at path. A last line without its
// newline (the process was killed while writing it) is ignored.
func ReadSyncJournal(path string) ([]SyncEvent, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read sync journal: %w", err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1]
	}
	var events []SyncEvent
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		e, err := parseSyncEvent(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("sync journal %s line %d: %w", path, n, err)
		}
		events = append(events, e)
	}
	return events, sc.Err()
}

func parseSyncEvent(line string) (SyncEvent, error) {
	op, rest, _ := strings.Cut(line, " ")
	var fields []string
	for rest != "" {
		var f string
		if rest[0] == '"' {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return SyncEvent{}, fmt.Errorf("%q: %w", line, err)
			}
			if f, err = strconv.Unquote(q); err != nil {
				return SyncEvent{}, fmt.Errorf("%q: %w", line, err)
			}
			rest = rest[len(q):]
		} else {
			f, rest, _ = strings.Cut(rest, " ")
		}
		fields = append(fields, f)
		rest = strings.TrimPrefix(rest, " ")
	}
	want := map[string]int{"create": 1, "delete": 1, "trunc": 2, "rename": 2, "sync": 3}
	n, ok := want[op]
	if !ok || len(fields) != n {
		return SyncEvent{}, fmt.Errorf("%q: unknown event or wrong field count", line)
	}
	e := SyncEvent{Op: op, Path: fields[0]}
	var err error
	switch op {
	case "rename":
		e.To = fields[1]
	case "trunc":
		e.Size, err = strconv.ParseInt(fields[1], 10, 64)
	case "sync":
		e.Size, err = strconv.ParseInt(fields[1], 10, 64)
		if err == nil {
			e.Since, err = strconv.ParseUint(fields[2], 10, 64)
		}
	}
	if err != nil || e.Size < 0 {
		return SyncEvent{}, fmt.Errorf("%q: bad number", line)
	}
	return e, nil
}

// DurableLengths replays journal events (events[i] is line i+1) and
// returns, for every file the journal knows to exist at its end, how many
// leading bytes of it are on stable storage: what a power cut after the
// last event would have left. A file created (or emptied) starts at 0; a
// sync raises it to the size taken before the sync began, bounded by every
// cut of the same path journaled after that (a truncation racing the sync
// made the bytes above the cut new ones, which the sync may have missed);
// a truncation lowers it; a rename moves it; a delete forgets it. A sync of
// a file the journal did not know (one from before the journal) makes it
// known. Files the result does not name are unknown: nothing of them is
// known durable.
func DurableLengths(events []SyncEvent) map[string]int64 {
	type cut struct {
		line uint64
		size int64
	}
	durable := map[string]int64{}
	cuts := map[string][]cut{} // per path, in journal order
	for i, e := range events {
		line := uint64(i + 1)
		switch e.Op {
		case "create":
			durable[e.Path] = 0
			cuts[e.Path] = append(cuts[e.Path], cut{line, 0})
		case "trunc":
			if d, ok := durable[e.Path]; ok {
				durable[e.Path] = min(d, e.Size)
			}
			cuts[e.Path] = append(cuts[e.Path], cut{line, e.Size})
		case "sync":
			bound := e.Size
			for _, c := range cuts[e.Path] {
				if c.line > e.Since {
					bound = min(bound, c.size)
				}
			}
			durable[e.Path] = max(durable[e.Path], bound)
		case "rename":
			d, known := durable[e.Path]
			delete(durable, e.Path)
			delete(durable, e.To)
			if known {
				durable[e.To] = d
			}
			// A sync of either name that began before the rename was of
			// another file than the one the name holds afterwards.
			cuts[e.Path] = append(cuts[e.Path], cut{line, 0})
			cuts[e.To] = append(cuts[e.To], cut{line, 0})
		case "delete":
			delete(durable, e.Path)
			cuts[e.Path] = append(cuts[e.Path], cut{line, 0})
		}
	}
	return durable
}

// WriteSyncJournalBaseline replaces the journal at path with one sync line
// per file of sizes: after a simulated power cut every byte left on disk
// counts as durable, and the next run journals from there.
func WriteSyncJournalBaseline(path string, sizes map[string]int64) error {
	paths := make([]string, 0, len(sizes))
	for p := range sizes {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var b strings.Builder
	for i, p := range paths {
		fmt.Fprintf(&b, "sync %s %d %d\n", strconv.Quote(p), sizes[p], i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write sync journal baseline: %w", err)
	}
	return nil
}

// OpenOption changes how Open sets up a Log.
type OpenOption func(*Log)

// WithSyncJournal makes the Log record its .log files' creations,
// truncations, renames, removals and fsyncs in j (test-only; nil: none).
func WithSyncJournal(j *SyncJournal) OpenOption {
	return func(l *Log) { l.journal = j }
}
