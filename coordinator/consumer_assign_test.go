package coordinator

import (
	"fmt"
	"testing"
)

func tid(b byte) [16]byte { return [16]byte{b} }

func subsOf(members map[string][]string) map[string]map[string]struct{} {
	out := map[string]map[string]struct{}{}
	for id, ts := range members {
		out[id] = map[string]struct{}{}
		for _, t := range ts {
			out[id][t] = struct{}{}
		}
	}
	return out
}

func counts(a map[string]tpSet) map[string]int {
	out := map[string]int{}
	for id, s := range a {
		out[id] = s.count()
	}
	return out
}

// checkExclusive: every partition of topics is assigned exactly once, to a
// subscriber.
func checkExclusive(t *testing.T, a map[string]tpSet, subs map[string]map[string]struct{}, topics map[string]topicMeta) {
	t.Helper()
	byID := map[[16]byte]string{}
	for name, tm := range topics {
		byID[tm.id] = name
	}
	seen := map[string]string{}
	for mid, s := range a {
		for id, ps := range s {
			for _, p := range ps {
				k := fmt.Sprintf("%s-%d", byID[id], p)
				if prev, ok := seen[k]; ok {
					t.Fatalf("%s assigned to %s and %s", k, prev, mid)
				}
				seen[k] = mid
				if _, ok := subs[mid][byID[id]]; !ok {
					t.Fatalf("%s assigned to %s, not subscribed", k, mid)
				}
			}
		}
	}
	for name, tm := range topics {
		subscribed := false
		for _, s := range subs {
			_, ok := s[name]
			subscribed = subscribed || ok
		}
		for p := int32(0); p < tm.partitions && subscribed; p++ {
			if _, ok := seen[fmt.Sprintf("%s-%d", name, p)]; !ok {
				t.Fatalf("%s-%d unassigned", name, p)
			}
		}
	}
}

func spread(c map[string]int) (lo, hi int) {
	first := true
	for _, n := range c {
		if first || n < lo {
			lo = n
		}
		if first || n > hi {
			hi = n
		}
		first = false
	}
	return lo, hi
}

func TestAssignUniformBalancedAndSticky(t *testing.T) {
	topics := map[string]topicMeta{"a": {tid(1), 7}, "b": {tid(2), 5}}
	subs := subsOf(map[string][]string{"m1": {"a", "b"}, "m2": {"a", "b"}})
	first := assignUniform(subs, topics, nil)
	checkExclusive(t, first, subs, topics)
	if lo, hi := spread(counts(first)); hi-lo > 1 {
		t.Fatalf("unbalanced: %v", counts(first))
	}
	// A third member joins: it gets 4 partitions, and every partition the
	// first two keep was theirs before (no swaps between them).
	subs3 := subsOf(map[string][]string{"m1": {"a", "b"}, "m2": {"a", "b"}, "m3": {"a", "b"}})
	second := assignUniform(subs3, topics, first)
	checkExclusive(t, second, subs3, topics)
	if c := counts(second); c["m1"] != 4 || c["m2"] != 4 || c["m3"] != 4 {
		t.Fatalf("counts after join: %v", c)
	}
	for _, m := range []string{"m1", "m2"} {
		for id, ps := range second[m] {
			for _, p := range ps {
				if !first[m].has(id, p) {
					t.Fatalf("%s got %v-%d it did not have: a partition moved between staying members", m, id[0], p)
				}
			}
		}
	}
	// The same input gives the same output (deterministic).
	if again := assignUniform(subs3, topics, first); !again["m3"].equal(second["m3"]) {
		t.Fatal("not deterministic")
	}
	// m3 leaves: its partitions go back, the others keep theirs.
	third := assignUniform(subs, topics, second)
	checkExclusive(t, third, subs, topics)
	if lo, hi := spread(counts(third)); hi-lo > 1 {
		t.Fatalf("unbalanced after leave: %v", counts(third))
	}
}

func TestAssignUniformHeterogeneous(t *testing.T) {
	topics := map[string]topicMeta{"a": {tid(1), 6}, "b": {tid(2), 2}}
	subs := subsOf(map[string][]string{"m1": {"a"}, "m2": {"a", "b"}, "m3": {"b"}})
	got := assignUniform(subs, topics, nil)
	checkExclusive(t, got, subs, topics)
	// 8 partitions over 3 members: only m2 and m3 may take b; the best
	// balance is 3/3/2.
	if lo, hi := spread(counts(got)); hi-lo > 1 {
		t.Fatalf("unbalanced: %v", counts(got))
	}
	// A member subscribed to nothing gets nothing; a topic nobody
	// subscribes to is not assigned.
	subs = subsOf(map[string][]string{"m1": {"a"}, "m2": {}})
	got = assignUniform(subs, map[string]topicMeta{"a": {tid(1), 3}, "c": {tid(3), 4}}, nil)
	if c := counts(got); c["m1"] != 3 || c["m2"] != 0 {
		t.Fatalf("counts: %v", c)
	}
}

func TestAssignRange(t *testing.T) {
	topics := map[string]topicMeta{"a": {tid(1), 5}, "b": {tid(2), 5}}
	subs := subsOf(map[string][]string{"m2": {"a", "b"}, "m1": {"a", "b"}})
	got := assignRange(subs, topics, nil)
	checkExclusive(t, got, subs, topics)
	want := map[string][]int32{"m1": {0, 1, 2}, "m2": {3, 4}}
	for m, ps := range want {
		for _, id := range [][16]byte{tid(1), tid(2)} {
			if fmt.Sprint(got[m][id]) != fmt.Sprint(ps) {
				t.Fatalf("%s topic %d: got %v, want %v (co-partitioned ranges)", m, id[0], got[m][id], ps)
			}
		}
	}
	if assignorByName("range") == nil || assignorByName("uniform") == nil || assignorByName("sticky") != nil {
		t.Fatal("assignor names")
	}
}
