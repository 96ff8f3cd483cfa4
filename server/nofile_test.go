package server

import "testing"

func TestNofileWanted(t *testing.T) {
	for _, tc := range []struct {
		partitions, segments int
		want                 uint64
	}{
		{0, 0, 4096},
		{1, 1, 4100},
		{100, 300, 4096 + 200 + 600},
		{10000, 10000, 4096 + 40000},
	} {
		if got := nofileWanted(tc.partitions, tc.segments); got != tc.want {
			t.Errorf("nofileWanted(%d, %d) = %d, want %d", tc.partitions, tc.segments, got, tc.want)
		}
	}
}

func TestRaiseOpenFileLimit(t *testing.T) {
	soft, hard, err := raiseOpenFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	if soft != hard {
		t.Fatalf("soft limit %d, hard %d: want them equal", soft, hard)
	}
}
