package buildinfo

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestReadAndOverride(t *testing.T) {
	i := Read()
	if i.GoVersion != runtime.Version() || i.Version == "" || i.Revision == "" {
		t.Fatalf("Read() = %+v", i)
	}
	oldV, oldR := version, revision
	t.Cleanup(func() { version, revision = oldV, oldR })
	version, revision = "v9.8.7", "abc123"
	if got := Read(); got.Version != "v9.8.7" || got.Revision != "abc123" {
		t.Fatalf("after link-time override: %+v", got)
	}
	if s := Read().String(); !strings.HasPrefix(s, "v9.8.7 (revision ") || !strings.Contains(s, runtime.Version()) {
		t.Fatalf("String() = %q", s)
	}
}

func TestCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector())
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "fencegate_build_info" || len(mfs[0].Metric) != 1 {
		t.Fatalf("gathered %v (%v), want one fencegate_build_info", mfs, err)
	}
	m := mfs[0].Metric[0]
	i := Read()
	want := map[string]string{"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion}
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	if len(got) != len(want) || m.GetGauge().GetValue() != 1 {
		t.Fatalf("fencegate_build_info %v = %v, want %v = 1", got, m.GetGauge().GetValue(), want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q", k, got[k], v)
		}
	}
}
