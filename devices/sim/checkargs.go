package sim

import (
	"encoding/json"

	"github.com/fencegate/fencegate/devices"
)

var _ devices.ArgsChecker = (*Device)(nil)

// CheckArgs reports, without touching the device, whether Apply would
// refuse op's args (devices.ArgsChecker): an op the device lacks is
// unknown_op; args that are not a JSON object, an unknown key, a missing
// set value or a pulse ms out of range are bad_request. Safe to call
// concurrently with Apply (the op table does not change once the device is
// open).
func (d *Device) CheckArgs(op string, raw json.RawMessage) error {
	spec, ok := d.ops[op]
	if !ok {
		return devices.Errorf(devices.CodeUnknownOp, "device %q has no op %q", d.id, op)
	}
	args, err := parseArgs(spec.name, raw)
	if err == nil {
		_, err = spec.prepare(args)
	}
	return devices.BadRequest(err)
}
