package mqttrelay

import (
	"encoding/json"

	"github.com/fencegate/fencegate/devices"
)

var _ devices.ArgsChecker = (*Relay)(nil)

// CheckArgs reports, without publishing anything, whether Apply would
// refuse op's args (devices.ArgsChecker): an op not configured is
// unknown_op; args that are not a JSON object, that do not fill the
// payload template or the confirmation's, or that make the confirmation
// pattern invalid, are bad_request. Safe to call concurrently with Apply
// (the op table is read-only after Open).
func (r *Relay) CheckArgs(op string, raw json.RawMessage) error {
	spec, ok := r.ops[op]
	if !ok {
		return devices.Errorf(devices.CodeUnknownOp, "device %q has no op %q", r.device, op)
	}
	args, err := parseArgs(raw)
	if err == nil {
		_, err = render(spec.payload, args)
	}
	if err == nil && spec.Confirm != nil {
		_, err = spec.matcher(args)
	}
	return devices.BadRequest(err)
}
