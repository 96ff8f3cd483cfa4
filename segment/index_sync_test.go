package segment

import (
	"path/filepath"
	"sync"
	"testing"
)

// TestIndexSyncWhileClosed: a flush after a roll syncs indexes without the
// Log's lock while retention, a truncation or the cleaner's swap may close
// the same segment; the mapping must not be replaced under the sync (go
// test -race caught the cleaner's swap unmapping an index a flush was
// msyncing).
func TestIndexSyncWhileClosed(t *testing.T) {
	for i := 0; i < 50; i++ {
		x, err := openOffsetIndex(filepath.Join(t.TempDir(), "00000000000000000000.index"), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.resize(1 << 16); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				_ = x.sync() // may find the file closed: an error, never a race
			}
		}()
		if err := x.close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
}
