package archtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// staticcheck is the pinned staticcheck command .ci/run runs: a pinned
// version through the module proxy, so a fresh machine with only Go runs
// the same checks.
const staticcheck = "go run honnef.co/go/tools/cmd/staticcheck@v0.8.2"

// TestCIRunsStaticcheck (issue 13: staticcheck runs in .ci/run): the CI
// script runs the pinned staticcheck over the main module after go vet.
// (The etcd store's own test module is not checked yet: staticcheck
// reports an unused field in its cluster helper.)
func TestCIRunsStaticcheck(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	vet := strings.Index(script, "\ngo vet ./...")
	check := strings.Index(script, "\n"+staticcheck+" ./...")
	if vet < 0 || check < vet {
		t.Errorf(".ci/run does not run %q after go vet (vet at %d, staticcheck at %d)", staticcheck+" ./...", vet, check)
	}
}
