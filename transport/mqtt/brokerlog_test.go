package mqtt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestBrokerLogDemotesDisconnects: mochi's empty-message warning for a
// client that went away is debug "client disconnected" (dropped at info);
// any other connection failure stays a warning, with a message.
func TestBrokerLogDemotesDisconnects(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string // at level info; "" for nothing
	}{
		{"eof", io.EOF, ""},
		{"wrapped eof", fmt.Errorf("read connect: %w", io.EOF), ""},
		{"other", errors.New("connect packet malformed"), `level=WARN msg="client connection failed" error="connect packet malformed"`},
	}
	for _, tt := range tests {
		var info, debug bytes.Buffer
		brokerLog(slog.New(slog.NewTextHandler(&info, nil))).Warn("", "error", tt.err)
		brokerLog(slog.New(slog.NewTextHandler(&debug, &slog.HandlerOptions{Level: slog.LevelDebug}))).Warn("", "error", tt.err)
		if got := strings.TrimSpace(info.String()); tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s at info: %q, want %q", tt.name, got, tt.want)
		}
		if tt.want == "" && !strings.Contains(debug.String(), `level=DEBUG msg="client disconnected"`) {
			t.Errorf("%s at debug: %q, want a debug client disconnected", tt.name, debug.String())
		}
	}
	var buf bytes.Buffer
	brokerLog(slog.New(slog.NewTextHandler(&buf, nil))).Warn("client store quota reached", "client", "c1")
	if !strings.Contains(buf.String(), `level=WARN msg="client store quota reached" client=c1`) {
		t.Errorf("other warnings changed: %q", buf.String())
	}
}
