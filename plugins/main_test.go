package plugins

import (
	"testing"

	"go.uber.org/goleak"
)

// goleakOptions ignores go-plugin's reattach watcher: a client attached to a
// test-mode plugin polls the plugin's pid — this test process — until it
// exits, and go-plugin offers no way to stop it.
var goleakOptions = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/hashicorp/go-plugin/internal/cmdrunner.pidWait"),
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleakOptions...) }
