package plugins

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// goleakOptions ignores go-plugin's reattach watcher: a client attached to a
// test-mode plugin polls the plugin's pid — this test process — until it
// exits, and go-plugin offers no way to stop it.
var goleakOptions = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/hashicorp/go-plugin/internal/cmdrunner.pidWait"),
}

// TestMain runs this binary as the test plugin when a host started it as
// one, as a test host process when a test started it as one, else the
// tests.
func TestMain(m *testing.M) {
	switch {
	case IsPlugin():
		testPluginMain()
		os.Exit(0)
	case os.Getenv(envTestHost) != "":
		os.Exit(testHostMain(os.Getenv(envTestHost)))
	}
	goleak.VerifyTestMain(m, goleakOptions...)
}
