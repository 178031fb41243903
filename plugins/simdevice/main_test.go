package simdevice

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencegate/fencegate/plugins"
)

// TestMain runs the plugin when a test started this binary as one (the
// real-child-process tests), else the tests.
func TestMain(m *testing.M) {
	if plugins.IsPlugin() {
		Main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m,
		// go-plugin's reattach watcher polls the in-process plugin's pid (this
		// process) until it exits; go-plugin offers no way to stop it.
		goleak.IgnoreTopFunction("github.com/hashicorp/go-plugin/internal/cmdrunner.pidWait"))
}
