package mqttrelay

import (
	"encoding/json"
	"testing"

	"github.com/fencegate/fencegate/devices"
)

// TestCheckArgs: args that do not fill the op's templates are bad_request
// before anything is published; an op not configured is unknown_op.
func TestCheckArgs(t *testing.T) {
	g := newRig(t, nil)
	tests := []struct {
		name, op, args string
		want           devices.Code
	}{
		{"fills the template", "power", `{"state":"ON"}`, ""},
		{"no args needed", "blink", ``, ""},
		{"missing arg", "power", `{"level":1}`, devices.CodeBadRequest},
		{"not an object", "power", `[1]`, devices.CodeBadRequest},
		{"unknown op", "dance", ``, devices.CodeUnknownOp},
	}
	for _, tt := range tests {
		err := g.relay.CheckArgs(tt.op, json.RawMessage(tt.args))
		if tt.want == "" && err != nil || tt.want != "" && devices.CodeOf(err) != tt.want {
			t.Errorf("%s: CheckArgs = %v, want code %q", tt.name, err, tt.want)
		}
	}
	if got := g.plug.Received(); len(got) != 0 {
		t.Fatalf("plug received %q from CheckArgs, want nothing", got)
	}
}
