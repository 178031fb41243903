package frame

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/devices"
)

// TestCheckArgs: args that are not an object, or cannot fit a frame, are
// bad_request before anything is sent; an op not configured is unknown_op.
func TestCheckArgs(t *testing.T) {
	fw := newFirmware(t, applyAll)
	d := mustOpen(t, fw.path)
	big := `{"v":"` + strings.Repeat("x", MaxPayload) + `"}`
	tests := []struct {
		name, op, args string
		want           devices.Code
	}{
		{"object", "set", `{"value":1}`, ""},
		{"absent", "set", ``, ""},
		{"not an object", "set", `"on"`, devices.CodeBadRequest},
		{"too large for a frame", "set", big, devices.CodeBadRequest},
		{"unknown op", "dance", ``, devices.CodeUnknownOp},
	}
	for _, tt := range tests {
		err := d.CheckArgs(tt.op, json.RawMessage(tt.args))
		if tt.want == "" && err != nil || tt.want != "" && devices.CodeOf(err) != tt.want {
			t.Errorf("%s: CheckArgs = %v, want code %q", tt.name, err, tt.want)
		}
	}
	if got := fw.received(); len(got) != 0 {
		t.Fatalf("firmware received %d bytes from CheckArgs", len(got))
	}
}
