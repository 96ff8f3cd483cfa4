package replica

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// partition.metadata is written once: opening a partition again with the
// same topic id leaves the file (its inode: no replacement) as it was.
func TestPartitionMetadataWrittenOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, partitionMetadataFile)
	id := [16]byte{1, 2, 3}
	inode := func() uint64 {
		t.Helper()
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Ino
	}
	if err := writePartitionTopicID(dir, id); err != nil {
		t.Fatal(err)
	}
	first := inode()
	if err := writePartitionTopicID(dir, id); err != nil {
		t.Fatal(err)
	}
	if inode() != first {
		t.Fatal("partition.metadata replaced although it already named the topic id")
	}
	other := [16]byte{9}
	if err := writePartitionTopicID(dir, other); err != nil {
		t.Fatal(err)
	}
	got, ok, err := readPartitionTopicID(dir)
	if err != nil || !ok || got != other {
		t.Fatalf("read %x, %v, %v; want %x", got, ok, err, other)
	}
}
