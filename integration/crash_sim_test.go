package integration

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kbroker/kbroker/segment"
)

// A simulated power cut for brokers run with kbroker.test.sync.journal: a
// kill -9 keeps the page cache, so everything a broker wrote would
// survive it; powerCut then cuts every file holding batches (.log, and
// the cleaner's .log.cleaned/.swap/.deleted) to the length its broker's
// journal says an fsync or fdatasync had made durable, which is what a
// power cut at the moment of the kill would have left of it.
//
// Every other file is left as the kill left it, deliberately:
//   - checkpoints (recovery point, log start, leader epochs, high
//     watermarks, partition.metadata, meta.properties) are written to a
//     temporary file, fsynced and renamed, so a power cut leaves either the
//     old or the new one, both of which the broker must cope with; the new
//     one is what the kill left;
//   - the .index/.timeindex/.txnindex of segments at or above the
//     recovery point are rebuilt from the .log by crash recovery (no clean
//     shutdown marker), and those below it were fsynced before the recovery
//     point moved past them;
//   - producer snapshots above the recovery point are deleted unread by
//     crash recovery, those below it were fsynced with their segments.
//
// Not modelled: directory entries. A file created (or renamed) whose
// directory was not fsynced afterwards could vanish with the power; here
// it stays (cut to its durable length, 0 if it was never synced).

// fileCut is what powerCut did to one file.
type fileCut struct {
	Path     string
	Size     int64 // as the kill left it
	Durable  int64 // what the journal says is on stable storage; -1: unknown to the journal
	Shortest bool  // the file was already shorter than Durable (left as is)
}

// powerCut applies the journal at journalPath to every batch file under
// logDirs (the broker must be dead), then replaces the journal with a
// baseline: after the cut, every byte left on disk counts as durable.
func powerCut(journalPath string, logDirs ...string) ([]fileCut, error) {
	events, err := segment.ReadSyncJournal(journalPath)
	if err != nil {
		return nil, err
	}
	durable := segment.DurableLengths(events)
	var cuts []fileCut
	after := map[string]int64{}
	for _, dir := range logDirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		err = filepath.WalkDir(abs, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // removed meanwhile: nothing to cut
				}
				return err
			}
			if d.IsDir() || !strings.Contains(d.Name(), ".log") {
				return nil
			}
			st, err := d.Info()
			if err != nil {
				return err
			}
			c := fileCut{Path: path, Size: st.Size(), Durable: -1}
			keep := int64(0)
			if n, ok := durable[path]; ok {
				c.Durable, keep = n, n
			}
			switch {
			case c.Size > keep:
				if err := os.Truncate(path, keep); err != nil {
					return fmt.Errorf("cut %s to %d: %w", path, keep, err)
				}
			case c.Size < keep:
				// A truncation the kill interrupted before its journal
				// line: the file holds less than the journal claims.
				c.Shortest, keep = true, c.Size
			}
			after[path] = keep
			cuts = append(cuts, c)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("power cut of %s: %w", dir, err)
		}
	}
	if err := segment.WriteSyncJournalBaseline(journalPath, after); err != nil {
		return nil, err
	}
	slices.SortFunc(cuts, func(a, b fileCut) int { return strings.Compare(a.Path, b.Path) })
	return cuts, nil
}

// logPowerCut logs what a cut dropped, per file that lost bytes, and every
// file the journal did not know.
func logPowerCut(t testing.TB, who string, cuts []fileCut) {
	t.Helper()
	var dropped int64
	for _, c := range cuts {
		switch {
		case c.Durable < 0:
			t.Logf("%s: %s is unknown to the sync journal: cut from %d bytes to 0", who, c.Path, c.Size)
		case c.Shortest:
			t.Logf("%s: %s is %d bytes, shorter than the journal's durable %d (an interrupted truncation): left as is", who, c.Path, c.Size, c.Durable)
		}
		if c.Size > max(c.Durable, 0) {
			dropped += c.Size - max(c.Durable, 0)
		}
	}
	t.Logf("%s: power cut of %d batch files dropped %d unsynced bytes", who, len(cuts), dropped)
}

// TestPowerCut checks the cut itself on files and a journal written by
// hand: synced bytes stay, unsynced ones go, a file the journal never saw
// is emptied, other files are left alone, and the journal is replaced by a
// baseline of what is left.
func TestPowerCut(t *testing.T) {
	dir := t.TempDir()
	part := filepath.Join(dir, "t-0")
	if err := os.MkdirAll(part, 0o755); err != nil {
		t.Fatal(err)
	}
	synced := filepath.Join(part, "00000000000000000000.log")
	active := filepath.Join(part, "00000000000000000100.log")
	stranger := filepath.Join(part, "00000000000000000200.log")
	index := filepath.Join(part, "00000000000000000100.index")
	for p, n := range map[string]int{synced: 1000, active: 700, stranger: 50, index: 80} {
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	journal := filepath.Join(t.TempDir(), "journal")
	q := strconv.Quote
	lines := []string{
		"create " + q(synced),
		"sync " + q(synced) + " 1000 1",
		"create " + q(active),
		"sync " + q(active) + " 300 3",
		"sync " + q(active) + " 650 4", // began before the truncation below
		"trunc " + q(active) + " 500",
	}
	// Reordered as they would be written: the truncation's line before
	// the racing sync's.
	lines[4], lines[5] = lines[5], lines[4]
	if err := os.WriteFile(journal, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cuts, err := powerCut(journal, dir)
	if err != nil {
		t.Fatal(err)
	}
	logPowerCut(t, "test", cuts)
	want := map[string]int64{synced: 1000, active: 500, stranger: 0, index: 80}
	for p, n := range want {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != n {
			t.Errorf("%s: %d bytes after the cut, want %d", filepath.Base(p), st.Size(), n)
		}
	}
	if len(cuts) != 3 {
		t.Errorf("cuts = %+v, want the 3 .log files", cuts)
	}
	events, err := segment.ReadSyncJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	delete(want, index)
	if got := segment.DurableLengths(events); !maps.Equal(got, want) {
		t.Errorf("baseline journal replays to %v, want %v", got, want)
	}
}
