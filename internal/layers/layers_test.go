package layers

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/kbroker/kbroker"

// allowed lists, for each package (or prefix ending in "/"), the project
// packages it may import directly; a package not listed may import any
// project package except those in forbiddenEverywhere. The rules are the
// dependency direction of shared/DESIGN.md: cmd -> server -> {coordinator,
// txn, controller, replica, protocol}; coordinator -> replica -> segment; the
// storage and wire edges import nothing of the project but the record
// batch format and small internal helpers.
var allowed = map[string][]string{
	"recordbatch":   {},
	"segment":       {"recordbatch", "internal/"},
	"protocol":      {"recordbatch", "internal/"},
	"replica":       {"recordbatch", "segment", "protocol", "internal/"},
	"coordinator":   {"recordbatch", "protocol", "internal/"},
	"txn":           {"recordbatch", "protocol", "internal/"},
	"controller":    {"controller/zk", "protocol", "internal/"},
	"controller/zk": {"internal/"},
	// config parses super.users with the ACL model's principal rules.
	"config":    {"internal/acl"},
	"internal/": {"internal/"},
	"server":    {"config", "controller", "coordinator", "txn", "replica", "segment", "protocol", "recordbatch", "internal/"},
	"verify":    {"segment", "recordbatch", "protocol", "internal/"},
}

// forbiddenEverywhere may be imported only by commands (cmd/...): test
// harnesses and the verifier are not libraries.
var forbiddenEverywhere = []string{"integration", "verify", "cmd/"}

func matches(pkg, rule string) bool {
	if strings.HasSuffix(rule, "/") {
		return strings.HasPrefix(pkg, rule)
	}
	return pkg == rule
}

func ruleFor(pkg string) ([]string, bool) {
	if r, ok := allowed[pkg]; ok {
		return r, true
	}
	for prefix, r := range allowed {
		if strings.HasSuffix(prefix, "/") && strings.HasPrefix(pkg, prefix) {
			return r, true
		}
	}
	return nil, false
}

// TestImportDirection fails on an import against the layering: go list
// reports every package's direct (non-test) imports.
func TestImportDirection(t *testing.T) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	checked := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkg := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		checked++
		rules, restricted := ruleFor(pkg)
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			if !strings.HasPrefix(pkg, "cmd/") && slices.ContainsFunc(forbiddenEverywhere, func(r string) bool { return matches(dep, r) }) {
				t.Errorf("%s imports %s: only commands may", pkg, dep)
				continue
			}
			if restricted && !slices.ContainsFunc(rules, func(r string) bool { return matches(dep, r) }) {
				t.Errorf("%s imports %s: against the layering (it may import %v)", pkg, dep, rules)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("go list reported %d packages: not the kbroker module?", checked)
	}
}
