// Package logtest is a slog handler for tests that keeps every record, so
// a test can check what a component logged or await a log line as an
// event. It is for tests only but an ordinary package so that the tests of
// several packages (plugins, plugins/simdevice) share one recorder.
package logtest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// WaitTimeout bounds WaitFor: generous, for a loaded CI machine.
const WaitTimeout = 60 * time.Second

// Record is one log record as strings: "msg" and "level" and each
// attribute by key (those of the record and of WithAttrs; groups are
// ignored), values as slog.Value.String renders them.
type Record map[string]string

// Recorder is a slog.Handler keeping every record. It is safe for
// concurrent use; handlers derived with WithAttrs share its records.
type Recorder struct {
	c    *core
	with []slog.Attr
}

// core is the state a Recorder and its derived handlers share.
type core struct {
	mu      sync.Mutex    // guards recs and changed
	recs    []Record      // in the order handled
	changed chan struct{} // closed (and replaced) when a record is added
}

var _ slog.Handler = (*Recorder)(nil)

// New returns an empty Recorder.
func New() *Recorder { return &Recorder{c: &core{changed: make(chan struct{})}} }

// Logger returns a logger writing to r.
func (r *Recorder) Logger() *slog.Logger { return slog.New(r) }

// Enabled reports true for every level.
func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps rec and wakes every waiter.
func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	m := Record{"msg": rec.Message, "level": rec.Level.String()}
	for _, a := range r.with {
		m[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.c.recs = append(r.c.recs, m)
	close(r.c.changed)
	r.c.changed = make(chan struct{})
	return nil
}

// WithAttrs returns a handler adding as to each record, sharing r's records.
func (r *Recorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &Recorder{c: r.c, with: append(append([]slog.Attr{}, r.with...), as...)}
}

// WithGroup returns r: groups are not recorded.
func (r *Recorder) WithGroup(string) slog.Handler { return r }

// Matching returns the records having every key/value of want, in order.
func (r *Recorder) Matching(want map[string]string) []Record {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	var out []Record
	for _, m := range r.c.recs {
		if m.has(want) {
			out = append(out, m)
		}
	}
	return out
}

func (m Record) has(want map[string]string) bool {
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Wait returns the first record having every key/value of want, waiting
// for one to be logged until ctx ends (then it returns ctx's error).
func (r *Recorder) Wait(ctx context.Context, want map[string]string) (Record, error) {
	for {
		r.c.mu.Lock()
		changed := r.c.changed
		r.c.mu.Unlock()
		if got := r.Matching(want); len(got) > 0 {
			return got[0], nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("logtest: no record matching %v: %w", want, ctx.Err())
		}
	}
}

// WaitFor is Wait bounded by WaitTimeout; it fails tb, showing every
// record, if none matches by then.
func (r *Recorder) WaitFor(tb testing.TB, want map[string]string) Record {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	m, err := r.Wait(ctx, want)
	if err != nil {
		tb.Fatalf("%v; log:\n%s", err, r.Dump())
	}
	return m
}

// Dump renders every record, one a line, for failure messages.
func (r *Recorder) Dump() string {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	var b strings.Builder
	for _, m := range r.c.recs {
		fmt.Fprintln(&b, m)
	}
	return b.String()
}
