package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the watch goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until the buffer holds want, failing after 30 s.
func (s *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(s.String(), want) {
			return
		}
	}
	t.Fatalf("watch output lacks %q:\n%s", want, s.String())
}

// TestWatchShowsReplyTopicResults: watch shows the results of commands
// another client sent with a reply_to (fencectl send answers on its own
// reply topic), only for the devices watched, and no lease responses.
func TestWatchShowsReplyTopicResults(t *testing.T) {
	s := startStack(t)
	b := "--broker=" + s.URL()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errs syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"watch", "pump1", b, "--for", "60s"}, &out, &errs) }()
	defer func() { cancel(); <-done }()
	out.waitFor(t, "state  pump1") // the retained state: the subscriptions are in place
	if _, e, code := fencectl(t, "send", "valve1", "set", `{"value":2}`, b, "--domain", "plant", "--id", "w-valve"); code != exitOK {
		t.Fatalf("send valve1: exit %d %s", code, e)
	}
	if _, e, code := fencectl(t, "send", "pump1", "set", `{"value":1}`, b, "--domain", "plant", "--id", "w-pump"); code != exitOK {
		t.Fatalf("send pump1: exit %d %s", code, e)
	}
	out.waitFor(t, "result pump1 w-pump: applied ok")
	got := out.String()
	if !strings.Contains(got, "(reply to fencegate/v1/replies/") {
		t.Errorf("the result does not name its reply topic:\n%s", got)
	}
	if strings.Contains(got, "w-valve") || strings.Contains(got, "request_id") || strings.Contains(got, "granted") {
		t.Errorf("watch pump1 printed another device's result or a lease response:\n%s", got)
	}
}
