package sim

import (
	"encoding/json"
	"testing"

	"github.com/fencegate/fencegate/devices"
)

// TestCheckArgs: what Apply would refuse for its args, CheckArgs refuses
// as bad_request (unknown_op for a missing op), without touching the device.
func TestCheckArgs(t *testing.T) {
	d, err := New("pump1", Config{Ops: []OpConfig{{Name: "set"}, {Name: "get"}, {Name: "pulse"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tests := []struct {
		name, op, args string
		want           devices.Code // "" for nil
	}{
		{"set ok", "set", `{"value":3}`, ""},
		{"get no args", "get", ``, ""},
		{"pulse ok", "pulse", `{"ms":10}`, ""},
		{"not an object", "set", `[1]`, devices.CodeBadRequest},
		{"unknown key", "set", `{"value":1,"colour":"red"}`, devices.CodeBadRequest},
		{"missing value", "set", `{}`, devices.CodeBadRequest},
		{"pulse out of range", "pulse", `{"ms":-1}`, devices.CodeBadRequest},
		{"unknown op", "dance", ``, devices.CodeUnknownOp},
	}
	for _, tt := range tests {
		err := d.CheckArgs(tt.op, json.RawMessage(tt.args))
		if tt.want == "" && err != nil || tt.want != "" && devices.CodeOf(err) != tt.want {
			t.Errorf("%s: CheckArgs = %v, want code %q", tt.name, err, tt.want)
		}
	}
	if d.attempts != 0 {
		t.Fatalf("CheckArgs reached the device: %d attempts", d.attempts)
	}
}
