package line

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
)

// TestCheckArgs: args that fail the op's declarations, or render a bad
// request, are bad_request before anything is sent.
func TestCheckArgs(t *testing.T) {
	in := newInstrument(t, map[string]string{"SET 2 7": "OK\n"})
	d := mustOpen(t, testConfig(in.path))
	tests := []struct {
		name, op, args string
		want           devices.Code
	}{
		{"ok", "set", `{"ch":2,"value":"7"}`, ""},
		{"out of range", "set", `{"ch":9,"value":"7"}`, devices.CodeBadRequest},
		{"missing arg", "get", `{}`, devices.CodeBadRequest},
		{"unknown arg", "get", `{"ch":1,"x":1}`, devices.CodeBadRequest},
		{"not an object", "get", `[1]`, devices.CodeBadRequest},
		{"control character", "raw", `{"text":"A\nB"}`, devices.CodeBadRequest},
		{"unknown op", "dance", ``, devices.CodeUnknownOp},
	}
	for _, tt := range tests {
		err := d.CheckArgs(tt.op, json.RawMessage(tt.args))
		if tt.want == "" && err != nil || tt.want != "" && devices.CodeOf(err) != tt.want {
			t.Errorf("%s: CheckArgs = %v, want code %q", tt.name, err, tt.want)
		}
	}
	if _, err := apply(d, "set", `{"ch":2,"value":"7"}`, 5*time.Second); err != nil {
		t.Fatalf("apply after the checks: %v", err)
	}
	if got := in.next(t); got != "SET 2 7" {
		t.Fatalf("first line the instrument got: %q, want only the applied SET 2 7", got)
	}
}
