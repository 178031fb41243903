package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"strings"
	"sync"
)

// stderrLog forwards a plugin's stderr to the agent's log, one record per
// line. A line in hclog's JSON form (what Logger writes) keeps its level,
// message and attributes; any other line is logged at Info as is. go-plugin
// writes each line and its newline separately, from one goroutine; Write is
// nevertheless safe for concurrent use.
type stderrLog struct {
	log      *slog.Logger
	mu       sync.Mutex // guards buf and dropping
	buf      []byte     // the current line so far
	dropping bool       // the current line passed maxStderrLine: drop up to its newline
}

// maxStderrLine bounds one logged stderr line: a plugin that never writes a
// newline cannot grow the agent's memory. The rest of a longer line, up to
// its newline, is dropped, and a warning with its first bytes is logged.
const maxStderrLine = 64 << 10

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	lines, cut := w.split(p)
	w.mu.Unlock()
	if cut != nil {
		w.log.Warn("plugin stderr line over the cap; the rest of it is dropped", "stream", "stderr",
			"cap", maxStderrLine, "head", string(cut))
	}
	for _, l := range lines {
		w.logLine(l)
	}
	return len(p), nil
}

// split adds p to the current line and returns the lines it completed, and
// the head of a line that just passed the cap (nil if none). w.mu is held.
func (w *stderrLog) split(p []byte) (lines [][]byte, cut []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			return lines, w.add(p, cut)
		}
		cut = w.add(p[:i], cut)
		if !w.dropping {
			lines = append(lines, bytes.Clone(w.buf))
		}
		w.buf, w.dropping = w.buf[:0], false
		p = p[i+1:]
	}
	return lines, cut
}

// add appends b to the current line unless that passes the cap; it returns
// cut, or the head of the line if this call passed the cap.
func (w *stderrLog) add(b, cut []byte) []byte {
	switch {
	case w.dropping:
	case len(w.buf)+len(b) > maxStderrLine:
		cut = bytes.Clone(append(w.buf, b...)[:256])
		w.buf, w.dropping = w.buf[:0], true
	default:
		w.buf = append(w.buf, b...)
	}
	return cut
}

func (w *stderrLog) logLine(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var m map[string]any
	msg, ok := "", false
	if json.Unmarshal(line, &m) == nil {
		msg, ok = m["@message"].(string)
	}
	if !ok {
		w.log.Info(string(line), "stream", "stderr")
		return
	}
	level := levelOf(m["@level"])
	w.log.Log(context.Background(), level, msg, attrsOf(m)...)
}

func levelOf(v any) slog.Level {
	s, _ := v.(string)
	switch strings.ToLower(s) {
	case "trace", "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// attrsOf returns m's keys other than hclog's own, sorted.
func attrsOf(m map[string]any) []any {
	keys := make([]string, 0, len(m))
	for k := range m {
		if !strings.HasPrefix(k, "@") && k != "timestamp" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	attrs := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		attrs = append(attrs, k, m[k])
	}
	return attrs
}
