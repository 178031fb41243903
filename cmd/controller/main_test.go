package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// childEnv makes the test binary run the controller with the JSON-encoded
// arguments it holds, instead of the tests.
const childEnv = "FENCEGATE_CONTROLLER_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		os.Exit(child(args))
	}
	goleak.VerifyTestMain(m)
}

// child is main for a controller run as a child process by a test.
func child(argsJSON string) int {
	var args []string
	if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cmd, err := parseArgs(args, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cmd, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		return 1
	}
	return 0
}
