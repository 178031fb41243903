package devices

import (
	"errors"
	"fmt"
	"testing"
)

func TestMessageOfAndBadRequest(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"driver error", Errorf(CodeDeviceError, "port closed"), "port closed"},
		{"wrapped", fmt.Errorf("plugin vfd: %w", Errorf(CodeDeviceError, "port closed")), "plugin vfd: port closed"},
		{"no message", &Error{Code: CodeDeviceTimeout}, ""},
		{"wrapped, no message", fmt.Errorf("relay: %w", &Error{Code: CodeDeviceTimeout}), "relay"},
		{"plain", errors.New("device_error: plain text stays"), "device_error: plain text stays"},
	}
	for _, tt := range tests {
		if got := MessageOf(tt.err); got != tt.want {
			t.Errorf("%s: MessageOf = %q, want %q", tt.name, got, tt.want)
		}
	}
	err := BadRequest(Errorf(CodeDeviceError, "set: args.value is required"))
	if CodeOf(err) != CodeBadRequest || err.Error() != "bad_request: set: args.value is required" {
		t.Fatalf("BadRequest: %q (code %s)", err, CodeOf(err))
	}
	if BadRequest(nil) != nil {
		t.Fatal("BadRequest(nil) is not nil")
	}
}
