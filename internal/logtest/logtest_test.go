package logtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencegate/fencegate/internal/logtest"
)

// TestRecorderKeepsAttrs: a record keeps its message, level, its own
// attributes and those of the logger it went through.
func TestRecorderKeepsAttrs(t *testing.T) {
	rec := logtest.New()
	rec.Logger().With("device", "pump1").Warn("apply started", "id", "c1")
	rec.Logger().Info("other")
	got := rec.Matching(map[string]string{"msg": "apply started"})
	if len(got) != 1 || got[0]["device"] != "pump1" || got[0]["id"] != "c1" || got[0]["level"] != "WARN" {
		t.Fatalf("records %v, want one WARN apply started with device pump1 and id c1", got)
	}
	if n := len(rec.Matching(nil)); n != 2 {
		t.Fatalf("%d records, want 2", n)
	}
}

// TestRecorderWaitAwaitsALaterRecord: WaitFor returns a record another
// goroutine logs concurrently, after records that do not match.
func TestRecorderWaitAwaitsALaterRecord(t *testing.T) {
	rec := logtest.New()
	waiting := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-waiting
		rec.Logger().Info("noise")
		rec.Logger().Info("ready", "n", 2)
	}()
	close(waiting)
	if m := rec.WaitFor(t, map[string]string{"msg": "ready"}); m["n"] != "2" {
		t.Fatalf("record %v, want n=2", m)
	}
	<-done
}

// TestRecorderWaitEndsWithItsContext: with no matching record, Wait
// returns its context's error.
func TestRecorderWaitEndsWithItsContext(t *testing.T) {
	rec := logtest.New()
	rec.Logger().Info("something else")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rec.Wait(ctx, map[string]string{"msg": "never"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v, want context.Canceled", err)
	}
}
