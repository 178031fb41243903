package line

import (
	"encoding/json"

	"github.com/fencegate/fencegate/devices"
)

var _ devices.ArgsChecker = (*Device)(nil)

// CheckArgs reports, without any I/O, whether Apply would refuse op's args
// (devices.ArgsChecker): an undeclared op is unknown_op; args that fail the
// op's declarations, or a request that would render badly (a control
// character, longer than max_line), are bad_request. Safe to call
// concurrently with Apply (the op table does not change once open).
func (d *Device) CheckArgs(op string, raw json.RawMessage) error {
	spec, ok := d.ops[op]
	if !ok {
		return devices.Errorf(devices.CodeUnknownOp, "device %q has no op %q", d.id, op)
	}
	data, err := spec.parseArgs(raw)
	if err != nil {
		return devices.Errorf(devices.CodeBadRequest, "args: %v", err)
	}
	if _, err := spec.render(data, d.maxLine); err != nil {
		return devices.Errorf(devices.CodeBadRequest, "%v", err)
	}
	return nil
}
