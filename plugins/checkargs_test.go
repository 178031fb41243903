package plugins

import (
	"encoding/json"
	"testing"

	"github.com/fencegate/fencegate/devices"
)

// TestCheckArgs: args that are not a JSON object are bad_request, an op the
// plugin did not describe unknown_op, without a call into the plugin.
func TestCheckArgs(t *testing.T) {
	f := &fake{}
	h, _ := serve(t, f)
	tests := []struct {
		name, op, args string
		want           devices.Code
	}{
		{"object", "set", `{"value":1}`, ""},
		{"absent", "get", ``, ""},
		{"not an object", "set", `[1,2]`, devices.CodeBadRequest},
		{"not JSON", "set", `{"value":`, devices.CodeBadRequest},
		{"unknown op", "dance", ``, devices.CodeUnknownOp},
	}
	for _, tt := range tests {
		err := h.CheckArgs(tt.op, json.RawMessage(tt.args))
		if tt.want == "" && err != nil || tt.want != "" && devices.CodeOf(err) != tt.want {
			t.Errorf("%s: CheckArgs = %v, want code %q", tt.name, err, tt.want)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.got) != 0 {
		t.Fatalf("the plugin got %d commands from CheckArgs", len(f.got))
	}
}
