package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/buildinfo"
)

// TestBuildInfoOverHTTP: /v1/status and /metrics report what the binary
// was built from, as --version does.
func TestBuildInfoOverHTTP(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	var st AgentStatus
	getJSON(t, "http://"+h.agent.HTTPAddr()+"/v1/status", &st)
	want := buildinfo.Read()
	if st.Build != want || st.Agent == "" || len(st.Devices) != 1 || !st.Store.Healthy {
		t.Fatalf("/v1/status: %+v, want build %+v, one device, store ok", st, want)
	}
	line := fmt.Sprintf("fencegate_build_info{goversion=%q,revision=%q,version=%q} 1", want.GoVersion, want.Revision, want.Version)
	if body := getBody(t, "http://"+h.agent.HTTPAddr()+"/metrics"); !strings.Contains(body, line) {
		t.Fatalf("/metrics lacks %s", line)
	}
}
