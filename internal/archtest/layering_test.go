package archtest

import (
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const (
	// module is the import-path prefix of fencegate's packages.
	module = "github.com/fencegate/fencegate/"
	// root is the main module's directory, seen from this package.
	root = "../.."
)

// layers places every fencegate package (import path without the module
// prefix) in a layer of docs/architecture.md; a pattern ending in "/..."
// covers the package and everything below it, and the longest matching
// pattern wins. A package in no layer is itself a failure: a new package
// gets a row here and in the document.
var layers = map[string]int{
	"fence": 0, "fence/fencetest": 0, "fence/internal/seedkey": 0, "internal/atomicfile": 0, "internal/yamlcfg": 0,
	"internal/buildinfo": 0, "internal/sdnotify": 0,
	"internal/logtest": 0, "internal/proctest": 0, "internal/tlstest": 0, "internal/httpauth": 1, "internal/archtest": 0, "internal/lossyfs/...": 0,
	"internal/backupfile": 0, "internal/pagehead": 0, "internal/benchline": 0,
	"chaos/history": 0, "chaos/netproxy": 0,
	"protocol": 1, "transport/...": 1,
	"internal/groupcommit": 2, "persist": 2, "devices/...": 2, "plugins/...": 2,
	"internal/mqtttest": 2,
	"agent":             3, "lease/...": 3, "controller/...": 3, "supervisor": 3, "internal/benchload": 3,
	"chaos/check": 3,
	"cmd/...":     4, "internal/stack": 4, "internal/browsertest": 4, "internal/securitytest": 4, "internal/benchagent": 4, "internal/benchgrant": 4, "chaos": 4, "hwtest/...": 4, "examples/...": 4,
	"firmware/...": 4,
}

// servers are layer 3's independent groups: a package of one never imports
// a package of another (the supervisor SDK never the controller, the agent
// never either).
var servers = map[string]string{
	"agent": "agent", "lease/...": "lease", "controller/...": "lease", "supervisor": "supervisor",
}

// mayImport lists, for the packages whose imports are closed lists, all
// that they may import of ours: fence and its leaf nothing but
// internal/atomicfile, protocol only fence, persist (the agent's fence
// store) only fence, protocol and the group-commit engine.
var mayImport = map[string][]string{
	"fence":               {"internal/atomicfile"},
	"internal/atomicfile": {},
	"protocol":            {"fence"},
	"persist":             {"fence", "protocol", "internal/groupcommit"},
}

// match returns the value of the longest pattern of table matching pkg.
func match[V any](table map[string]V, pkg string) (V, bool) {
	var best V
	bestLen, found := -1, false
	for pat, v := range table {
		base, tree := strings.CutSuffix(pat, "/...")
		if (pkg == base || tree && strings.HasPrefix(pkg, base+"/")) && len(base) > bestLen {
			best, bestLen, found = v, len(base), true
		}
	}
	return best, found
}

// violations checks a graph of fencegate packages (package → its direct
// fencegate imports, module prefix removed) against the rules of
// docs/architecture.md and returns one sentence per broken rule, sorted.
func violations(graph map[string][]string) []string {
	var out []string
	for pkg, imps := range graph {
		if _, ok := match(layers, pkg); !ok {
			out = append(out, fmt.Sprintf("%s is in no layer of docs/architecture.md", pkg))
			continue
		}
		for _, imp := range imps {
			out = append(out, importViolations(pkg, imp)...)
		}
	}
	sort.Strings(out)
	return out
}

// importViolations returns what is wrong with pkg importing imp.
func importViolations(pkg, imp string) []string {
	var out []string
	from, _ := match(layers, pkg)
	to, ok := match(layers, imp)
	switch {
	case !ok:
		out = append(out, fmt.Sprintf("%s imports %s, which is in no layer", pkg, imp))
	case to > from:
		out = append(out, fmt.Sprintf("%s (layer %d) imports %s (layer %d)", pkg, from, imp, to))
	}
	for _, rule := range importRules {
		if msg := rule(pkg, imp); msg != "" {
			out = append(out, msg)
		}
	}
	return out
}

// importRules are the rules beyond "never upwards", each returning a
// sentence when pkg importing imp breaks it.
var importRules = []func(pkg, imp string) string{
	func(pkg, imp string) string {
		if under(pkg, "transport") && !under(imp, "transport") {
			return fmt.Sprintf("%s imports the domain package %s (transport holds connections only)", pkg, imp)
		}
		return ""
	},
	func(pkg, imp string) string {
		a, okA := match(servers, pkg)
		b, okB := match(servers, imp)
		if okA && okB && a != b {
			return fmt.Sprintf("%s imports %s (the %s and %s sides are independent)", pkg, imp, a, b)
		}
		return ""
	},
	func(pkg, imp string) string {
		if may, closed := mayImport[pkg]; closed && !contains(may, imp) {
			return fmt.Sprintf("%s imports %s (it may import only %q)", pkg, imp, may)
		}
		return ""
	},
	func(pkg, imp string) string {
		if under(pkg, "devices") && under(imp, "agent") {
			return fmt.Sprintf("driver %s imports %s", pkg, imp)
		}
		return ""
	},
}

// under reports whether pkg is dir or below it.
func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestLayeringRulesCatchWrongImports feeds the checker one wrong-way import
// per rule of docs/architecture.md and requires each to be reported, and a
// graph of right-way imports to pass.
func TestLayeringRulesCatchWrongImports(t *testing.T) {
	tests := []struct {
		name, pkg, imp string
		wrong          bool
	}{
		{name: "fence imports protocol", pkg: "fence", imp: "protocol", wrong: true},
		{name: "protocol imports persist", pkg: "protocol", imp: "persist", wrong: true},
		{name: "devices imports lease", pkg: "devices", imp: "lease", wrong: true},
		{name: "supervisor imports lease", pkg: "supervisor", imp: "lease", wrong: true},
		{name: "supervisor imports the controller library", pkg: "supervisor", imp: "controller", wrong: true},
		{name: "supervisor imports lease/server", pkg: "supervisor", imp: "lease/server", wrong: true},
		{name: "agent imports lease", pkg: "agent", imp: "lease", wrong: true},
		{name: "transport imports fence", pkg: "transport/mqtt", imp: "fence", wrong: true},
		{name: "transport imports protocol", pkg: "transport/serial", imp: "protocol", wrong: true},
		{name: "driver imports agent", pkg: "devices/sim", imp: "agent", wrong: true},
		{name: "persist imports devices", pkg: "persist", imp: "devices", wrong: true},
		{name: "persist imports internal/yamlcfg", pkg: "persist", imp: "internal/yamlcfg", wrong: true},
		{name: "fence imports internal/yamlcfg", pkg: "fence", imp: "internal/yamlcfg", wrong: true},
		{name: "protocol imports transport", pkg: "protocol", imp: "transport/mqtt", wrong: true},
		{name: "fence imports atomicfile", pkg: "fence", imp: "internal/atomicfile"},
		{name: "library imports cmd", pkg: "lease", imp: "cmd/controller", wrong: true},
		{name: "package in no layer", pkg: "newthing", imp: "fence", wrong: true},
		{name: "import of a package in no layer", pkg: "agent", imp: "newthing", wrong: true},
		{name: "persist imports groupcommit", pkg: "persist", imp: "internal/groupcommit"},
		{name: "driver imports devices", pkg: "devices/line", imp: "devices"},
		{name: "controller library imports lease", pkg: "controller", imp: "lease"},
		{name: "lease/server imports lease/boltstore", pkg: "lease/server", imp: "lease/boltstore"},
		{name: "supervisor imports transport", pkg: "supervisor", imp: "transport/mqtt"},
		{name: "cmd imports internal/stack", pkg: "cmd/fencectl", imp: "internal/stack"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := violations(map[string][]string{tc.pkg: {tc.imp}})
			if (len(got) > 0) != tc.wrong {
				t.Fatalf("%s importing %s: violations %q, want wrong=%v", tc.pkg, tc.imp, got, tc.wrong)
			}
		})
	}
}

// TestLayering checks every package of the module against the rules of
// docs/architecture.md: no import goes the wrong way.
func TestLayering(t *testing.T) {
	for _, v := range violations(moduleGraph(t)) {
		t.Error(v)
	}
}

// moduleGraph lists the module's packages with their direct fencegate
// imports (tests' imports excluded), module prefix removed.
func moduleGraph(t *testing.T) map[string][]string {
	t.Helper()
	out := goList(t, "-f", "{{.ImportPath}}|{{join .Imports \" \"}}", "./...")
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		pkg, imps, _ := strings.Cut(line, "|")
		pkg = strings.TrimPrefix(pkg, module)
		graph[pkg] = nil
		for _, imp := range strings.Fields(imps) {
			if rest, ok := strings.CutPrefix(imp, module); ok {
				graph[pkg] = append(graph[pkg], rest)
			}
		}
	}
	if len(graph) < 10 {
		t.Fatalf("go list ./... lists %d packages; want the whole module", len(graph))
	}
	return graph
}

// goList runs `go list args...` at the module root and returns its output.
func goList(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is not on PATH; cannot list imports")
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}
