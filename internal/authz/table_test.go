package authz

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRulesWellFormed(t *testing.T) {
	seen := map[int16]bool{}
	for _, r := range Rules() {
		name := kmsg.NameForKey(r.Key)
		if seen[r.Key] {
			t.Errorf("%s listed twice", name)
		}
		seen[r.Key] = true
		for i, c := range r.Checks {
			if len(c.AnyOf) == 0 {
				t.Errorf("%s check %d: no grant passes it", name, i)
			}
			switch c.Effect {
			case Refused:
				if c.Error == 0 {
					t.Errorf("%s check %d: refused without an error code", name, i)
				}
			case LeftOut, NoOperations:
				if c.Error != 0 {
					t.Errorf("%s check %d: %d but nothing is refused", name, i, c.Error)
				}
			default:
				t.Errorf("%s check %d: effect %d", name, i, c.Effect)
			}
			for _, g := range c.AnyOf {
				if g.Resource < kmsg.ACLResourceTypeTopic || g.Resource > kmsg.ACLResourceTypeUser ||
					g.Op < kmsg.ACLOperationRead || g.Op > kmsg.ACLOperationDescribeTokens {
					t.Errorf("%s check %d: grant %+v is not a concrete operation on a concrete type", name, i, g)
				}
			}
		}
	}
	if r, ok := Lookup(kmsg.Produce.Int16()); !ok || len(r.Checks) != 2 {
		t.Errorf("Lookup(Produce) = %+v, %v", r, ok)
	}
	if _, ok := Lookup(-1); ok {
		t.Error("Lookup(-1) found a rule")
	}
	// Each call builds its own table.
	Rules()[0].Checks[0].Error = 0
	if Rules()[0].Checks[0].Error == 0 {
		t.Error("Rules shares its table between calls")
	}
}
