package kafkahash

import (
	"fmt"
	"testing"
)

func TestJavaStringHashCode(t *testing.T) {
	// Java String.hashCode values, computed by the JVM.
	for _, tc := range []struct {
		s    string
		hash int32
	}{
		{"", 0},
		{"test", 3556498},
		{"hello", 99162322},
		{"polygenelubricants", -1 << 31}, // the famous MIN_VALUE hash
		{"\U0001F600", 1772899},          // surrogate pair d83d de00
	} {
		if got := JavaStringHashCode(tc.s); got != tc.hash {
			t.Errorf("hashCode(%q) = %d, want %d", tc.s, got, tc.hash)
		}
	}
}

func TestPartitionFor(t *testing.T) {
	if got := PartitionFor("test", 50); got != 3556498%50 {
		t.Errorf("PartitionFor(test) = %d, want %d", got, 3556498%50)
	}
	// Utils.abs(MIN_VALUE) is 0.
	if got := PartitionFor("polygenelubricants", 50); got != 0 {
		t.Errorf("PartitionFor(polygenelubricants) = %d, want 0", got)
	}
	// A negative hash: Kafka's Utils.abs is Math.abs, not n & 0x7fffffff.
	s := "console-consumer-40263"
	h := JavaStringHashCode(s)
	for i := 0; h >= 0; i++ {
		s = fmt.Sprintf("group-%d", i)
		h = JavaStringHashCode(s)
	}
	if got, want := PartitionFor(s, 50), (-h)%50; got != want {
		t.Errorf("PartitionFor(%q) (hash %d) = %d, want %d", s, h, got, want)
	}
	if got := PartitionFor("x", 0); got != 0 {
		t.Errorf("PartitionFor with no partitions = %d, want 0", got)
	}
}
