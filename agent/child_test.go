//go:build linux

package agent

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// childConfigEnv names the environment variable that turns the test binary
// into an agent process: it holds the path of the agent's config file.
const childConfigEnv = "FENCEGATE_AGENT_CHILD_CONFIG"

// TestAgentChild is not a test: run by agentProc as a child process (the
// test binary re-executed with -test.run=^TestAgentChild$ and
// childConfigEnv set), it runs an agent like cmd/agent does until SIGTERM.
// Without the variable it is skipped.
func TestAgentChild(t *testing.T) {
	path := os.Getenv(childConfigEnv)
	if path == "" {
		t.Skip("runs only as the agent child process of the crash tests")
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	a, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(ctx); err != nil {
		t.Fatal(err)
	}
}
