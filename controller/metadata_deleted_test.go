package controller

import "testing"

// TestWithoutDeleted: topics whose ids ZooKeeper lists as deleted leave
// the view and their ids join DeletedTopicIDs (sorted, once); a view with
// none of them is returned as it is, and the original is never changed.
func TestWithoutDeleted(t *testing.T) {
	old, reborn, other := [16]byte{9}, [16]byte{1}, [16]byte{5}
	md := &Metadata{ClusterID: "c", Sequence: 7, Topics: map[string]*Topic{
		"gone":  {Name: "gone", ID: old},
		"again": {Name: "again", ID: reborn},
	}, DeletedTopicIDs: [][16]byte{other}}
	for _, tc := range []struct {
		name        string
		deleted     map[[16]byte]bool
		same        bool
		wantTopics  []string
		wantDeleted [][16]byte
	}{
		{"nothing deleted", nil, true, []string{"again", "gone"}, [][16]byte{other}},
		{"only ids not in the view", map[[16]byte]bool{other: true, {7}: true}, true, []string{"again", "gone"}, [][16]byte{other}},
		{"one topic deleted", map[[16]byte]bool{old: true}, false, []string{"again"}, [][16]byte{other, old}},
		{"both deleted", map[[16]byte]bool{old: true, reborn: true, other: true}, false, nil, [][16]byte{reborn, other, old}},
	} {
		got := withoutDeleted(md, tc.deleted)
		if (got == md) != tc.same {
			t.Errorf("%s: returned the same view %v, want %v", tc.name, got == md, tc.same)
		}
		var names []string
		for _, n := range []string{"again", "gone"} {
			if got.Topics[n] != nil {
				names = append(names, n)
			}
		}
		if len(names) != len(tc.wantTopics) || (len(names) > 0 && names[0] != tc.wantTopics[0]) {
			t.Errorf("%s: topics %v, want %v", tc.name, names, tc.wantTopics)
		}
		if len(got.DeletedTopicIDs) != len(tc.wantDeleted) {
			t.Errorf("%s: deleted ids %v, want %v", tc.name, got.DeletedTopicIDs, tc.wantDeleted)
		} else {
			for i := range tc.wantDeleted {
				if got.DeletedTopicIDs[i] != tc.wantDeleted[i] {
					t.Errorf("%s: deleted ids %v, want %v", tc.name, got.DeletedTopicIDs, tc.wantDeleted)
				}
			}
		}
		if got.Sequence != md.Sequence {
			t.Errorf("%s: sequence %d, want %d", tc.name, got.Sequence, md.Sequence)
		}
	}
	if len(md.Topics) != 2 || len(md.DeletedTopicIDs) != 1 {
		t.Errorf("the original view changed: %v", md)
	}
}
