package protocol_test

import (
	"os/exec"
	"strings"
	"testing"
)

const (
	module     = "github.com/fencegate/fencegate/"
	atomicfile = module + "internal/atomicfile"
)

// TestProtocolV1HasAHome checks the import direction of DESIGN §8 that the
// protocol package makes possible: transport/* imports no fencegate
// package outside transport, fence imports nothing of ours but the leaf
// internal/atomicfile (which imports nothing of ours), protocol only fence,
// and the supervisor SDK never the controller package lease.
func TestProtocolV1HasAHome(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is not on PATH; cannot list imports")
	}
	tests := []struct {
		name, pkgs string
		allowed    func(dep string) bool
	}{
		{"transport", "./transport/...", func(d string) bool { return strings.HasPrefix(d, module+"transport/") }},
		{"fence", "./fence", func(d string) bool { return d == module+"fence" || d == atomicfile }},
		{"atomicfile", "./internal/atomicfile", func(d string) bool { return d == atomicfile }},
		{"protocol", "./protocol", func(d string) bool {
			return d == module+"protocol" || d == module+"fence" || d == atomicfile
		}},
		{"supervisor", "./supervisor", func(d string) bool { return d != module+"lease" && !strings.HasPrefix(d, module+"lease/") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, dep := range ourDeps(t, tc.pkgs) {
				if !tc.allowed(dep) {
					t.Errorf("%s imports %s", tc.pkgs, dep)
				}
			}
		})
	}
}

// ourDeps lists the fencegate packages pkgs depend on (themselves included).
func ourDeps(t *testing.T, pkgs string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", pkgs)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkgs, err)
	}
	var ours []string
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, module) {
			ours = append(ours, dep)
		}
	}
	if len(ours) == 0 {
		t.Fatalf("go list -deps %s lists no fencegate package", pkgs)
	}
	return ours
}
