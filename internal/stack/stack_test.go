package stack_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencegate/fencegate/internal/logtest"
	"github.com/fencegate/fencegate/internal/stack"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStackRunsTheControllerLibrary: the stack's controller is the one
// cmd/controller runs (package lease/server), not a second wiring of its
// own: it logs the library's start ("controller running" on bbolt) and,
// on Close, its orderly shutdown; Close stops every goroutine (goleak).
func TestStackRunsTheControllerLibrary(t *testing.T) {
	rec := logtest.New()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{Dir: t.TempDir(), Log: rec.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	running := rec.Matching(map[string]string{"msg": "controller running", "component": "controller", "store": "bbolt"})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if len(running) != 1 {
		t.Fatalf("the stack's controller logged %d library starts, want 1", len(running))
	}
	if n := len(rec.Matching(map[string]string{"msg": "shutting down", "component": "controller"})); n != 1 {
		t.Fatalf("the stack's controller logged %d library shutdowns, want 1", n)
	}
}
