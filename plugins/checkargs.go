package plugins

import (
	"bytes"
	"encoding/json"

	"github.com/fencegate/fencegate/devices"
)

var _ devices.ArgsChecker = (*Host)(nil)

// CheckArgs reports, without calling the plugin, whether a command's args
// are refused whatever the plugin would say (devices.ArgsChecker): an op
// the plugin did not describe is unknown_op; args that are not a JSON
// object (or absent) are bad_request. What the args mean is checked by the
// plugin in Apply (protocol v1 of the plugin interface has no call to ask
// it earlier). Safe to call concurrently with Apply.
func (h *Host) CheckArgs(op string, raw json.RawMessage) error {
	if !h.caps.Supports(op) {
		return devices.Errorf(devices.CodeUnknownOp, "plugin for device %s has no op %q", h.device, op)
	}
	if t := bytes.TrimSpace(raw); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		var obj map[string]json.RawMessage
		if t[0] != '{' || json.Unmarshal(t, &obj) != nil {
			return devices.Errorf(devices.CodeBadRequest, "args must be a JSON object")
		}
	}
	return nil
}
