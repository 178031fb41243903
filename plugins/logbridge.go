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
	log *slog.Logger
	mu  sync.Mutex // guards buf
	buf []byte     // the current line so far
}

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf = append(w.buf, p...)
	var lines [][]byte
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, bytes.Clone(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	w.mu.Unlock()
	for _, l := range lines {
		w.logLine(l)
	}
	return len(p), nil
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
