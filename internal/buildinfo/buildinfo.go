// Package buildinfo reports what a fencegate binary was built from: the
// main module's version and the VCS revision that debug.ReadBuildInfo
// records, for every binary's --version and the servers' /metrics
// (fencegate_build_info) and status.
package buildinfo

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version and revision override what debug.ReadBuildInfo says when set at
// link time (-ldflags "-X github.com/fencegate/fencegate/internal/buildinfo.version=v1.2.3"),
// as deploy/release.sh does: the go command stamps no VCS revision with
// -buildvcs=false, nor in a git worktree (its .git is a file).
var version, revision string

// Info is what a binary was built from. Unknown fields read "unknown".
type Info struct {
	Version   string `json:"version"`    // main module version, "(devel)" for a plain go build without VCS
	Revision  string `json:"revision"`   // VCS revision (vcs.revision), "unknown" without VCS stamping
	Modified  bool   `json:"modified"`   // the work tree had changes (vcs.modified)
	GoVersion string `json:"go_version"` // toolchain that built the binary
}

// Read returns the running binary's build information. It is cheap and
// safe to call concurrently.
func Read() Info {
	i := Info{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		i.Version = orUnknown(bi.Main.Version)
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = orUnknown(s.Value)
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		i.Version = version
	}
	if revision != "" {
		i.Revision = revision
	}
	return i
}

// String is the one line --version prints after the binary's name:
// "v1.2.3 (revision 0123abcd…, go1.26.0)", with ", modified" for a build
// from a changed work tree.
func (i Info) String() string {
	mod := ""
	if i.Modified {
		mod = ", modified"
	}
	return fmt.Sprintf("%s (revision %s, %s%s)", i.Version, i.Revision, i.GoVersion, mod)
}

// Fprint writes "NAME VERSION (revision …)" and a newline to w.
func Fprint(w io.Writer, name string) {
	fmt.Fprintln(w, name, Read())
}

// Flag registers --version on fs; when the returned bool is true after
// parsing, the caller prints Fprint and exits 0.
func Flag(fs *flag.FlagSet) *bool {
	return fs.Bool("version", false, "print the version and VCS revision, then exit")
}

// Collector is the gauge fencegate_build_info{version,revision,goversion},
// always 1, for a server's Prometheus registry. Each call returns a new
// collector.
func Collector() prometheus.Collector {
	i := Read()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "fencegate_build_info",
		Help:        "Always 1; the labels say what the binary was built from.",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
