package line

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/transport/serial"
)

// Apply renders cmd's request, sends it and waits for a reply line:
//
//   - an undeclared op → unknown_op; args that fail their declarations or
//     a request that renders badly → device_error, nothing sent;
//   - no port → device_unavailable, nothing sent;
//   - a line matching the error pattern → device_error with the device's
//     message; the success pattern → output (named groups and "reply");
//   - other lines and garbage are logged and skipped;
//   - ctx done (or the op's timeout) first → device_timeout, saying what
//     was skipped; the port lost after sending → in_doubt.
func (d *Device) Apply(ctx context.Context, cmd devices.Command) (json.RawMessage, error) {
	op, ok := d.ops[cmd.Op]
	if !ok {
		return nil, devices.Errorf(devices.CodeUnknownOp, "device %q has no op %q", d.id, cmd.Op)
	}
	data, err := op.parseArgs(cmd.Args)
	if err != nil {
		return nil, devices.Errorf(devices.CodeDeviceError, "args: %v", err)
	}
	req, err := op.render(data, d.maxLine)
	if err != nil {
		return nil, devices.Errorf(devices.CodeDeviceError, "%v", err)
	}
	if op.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, op.Timeout)
		defer cancel()
	}
	d.link.Flush()
	lost := d.link.Lost()
	if _, err := d.link.Send(ctx, []byte(req+d.term)); err != nil {
		return nil, sendError(err)
	}
	return d.await(ctx, op, lost)
}

// skipped records what arrived that was not the reply.
type skipped struct {
	lines, garbage int
	last           string
}

func (s skipped) String() string {
	if s.lines+s.garbage == 0 {
		return "nothing arrived"
	}
	return fmt.Sprintf("skipped %d unexpected and %d garbled lines, last %q", s.lines, s.garbage, s.last)
}

func (d *Device) await(ctx context.Context, op opSpec, lost <-chan struct{}) (json.RawMessage, error) {
	var sk skipped
	for {
		select {
		case <-ctx.Done():
			return nil, &devices.Error{Code: devices.CodeDeviceTimeout, Err: context.Cause(ctx),
				Message: "no reply matched: " + sk.String()}
		case <-lost:
			return nil, devices.Errorf(devices.CodeInDoubt, "port lost after the request was sent; it may have been applied")
		case m := <-d.link.Recv():
			if done, out, err := d.handle(op, m, &sk); done {
				return out, err
			}
		}
	}
}

// handle takes one line; done reports that it answered the request.
func (d *Device) handle(op opSpec, m serial.Msg, sk *skipped) (done bool, out json.RawMessage, err error) {
	if m.Err != nil {
		sk.garbage++
		sk.last = string(serial.Truncate(m.Data, 64))
		d.log.Warn("garbled input from device", "op", op.Name, "err", m.Err)
		return false, nil, nil
	}
	kind, groups, msg := op.match.match(string(m.Data))
	switch kind {
	case DeviceError:
		return true, nil, devices.Errorf(devices.CodeDeviceError, "%s", msg)
	case Success:
		b, _ := json.Marshal(groups)
		return true, b, nil
	}
	sk.lines++
	sk.last = string(serial.Truncate(m.Data, 64))
	d.log.Warn("unexpected line from device skipped", "op", op.Name, "line", sk.last)
	return false, nil, nil
}
