package frame

import (
	"bytes"
	"encoding/json"

	"github.com/fencegate/fencegate/devices"
)

var (
	_ devices.ArgsChecker    = (*Device)(nil)
	_ devices.CommandChecker = (*Device)(nil)
)

// CheckArgs reports, without any I/O, whether Apply would refuse op's args
// (devices.ArgsChecker): an op not configured is unknown_op; args that are
// not a JSON object (or absent), or too large for a protocol v1 frame even
// with a one-byte id and empty domain and holder, are bad_request. What the
// args mean is the firmware's to check. Safe to call concurrently with Apply.
func (d *Device) CheckArgs(op string, raw json.RawMessage) error {
	if _, ok := d.ops[op]; !ok {
		return devices.Errorf(devices.CodeUnknownOp, "device %q has no op %q", d.id, op)
	}
	if t := bytes.TrimSpace(raw); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		var obj map[string]json.RawMessage
		if t[0] != '{' || json.Unmarshal(t, &obj) != nil {
			return devices.Errorf(devices.CodeBadRequest, "args must be a JSON object")
		}
	}
	if _, err := (Request{ID: "x", Op: op, Args: raw}).Marshal(); err != nil {
		return devices.Errorf(devices.CodeBadRequest, "command does not fit a protocol v1 frame: %v", err)
	}
	return nil
}

// CheckCommand is CheckArgs for the whole command (devices.CommandChecker):
// the frame Apply would send, with cmd's id, domain and holder, must fit
// protocol v1, exactly as Apply builds it (request); else bad_request,
// before the agent accepts the command.
func (d *Device) CheckCommand(cmd devices.Command) error {
	if err := d.CheckArgs(cmd.Op, cmd.Args); err != nil {
		return err
	}
	if _, err := request(cmd); err != nil {
		return devices.Errorf(devices.CodeBadRequest, "%s", devices.MessageOf(err))
	}
	return nil
}
