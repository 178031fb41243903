package line

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/transport/serial"
)

// Apply renders cmd's request, sends it and waits for a reply line:
//
//   - an undeclared op → unknown_op; args that fail their declarations or
//     a request that renders badly → device_error, nothing sent;
//   - no port, or the port took none of the request in time →
//     device_unavailable / device_timeout, nothing sent;
//   - after a command that got no reply, the line must first carry no
//     byte for the settle period (late replies are drained), and is then
//     flushed; if it does not fall silent before ctx is done →
//     device_timeout, nothing sent;
//   - a line matching the error pattern → device_error with the device's
//     message; the success pattern → output (named groups and "reply");
//     right after a command that got no reply, a second matching line
//     within the settle period makes the answer unattributable → in_doubt;
//   - other lines and garbage are logged and skipped;
//   - ctx done (or the op's timeout) after the request was handed to the
//     port, a partial write, or the port lost after sending → in_doubt; the
//     unsent rest is discarded first (TCOFLUSH), so once Apply has
//     answered the request can no longer reach the device.
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
	return d.exchange(ctx, op, []byte(req+d.term))
}

// exchange settles the line if needed, sends req and waits for its reply.
func (d *Device) exchange(ctx context.Context, op opSpec, req []byte) (json.RawMessage, error) {
	linger := d.suspect
	if linger {
		if err := d.settle(ctx); err != nil {
			return nil, err
		}
	}
	d.link.Flush()
	lost := d.link.Lost()
	if n, err := d.link.Send(ctx, req); err != nil {
		return nil, d.sendFailed(n, len(req), err)
	}
	d.suspect = true // until its reply arrives
	out, err := d.await(ctx, op, lost)
	if devices.CodeOf(err) == devices.CodeInDoubt {
		d.link.DropOutput()
		return nil, err
	}
	d.suspect = false
	if linger || d.checkEvery {
		return d.attribute(ctx, op, out, err)
	}
	return out, err
}

// sendFailed maps a failed send of size bytes of which the port took n.
func (d *Device) sendFailed(n, size int, err error) error {
	if n == 0 {
		return sendError(err)
	}
	d.suspect = true
	return &devices.Error{Code: devices.CodeInDoubt, Err: err,
		Message: fmt.Sprintf("the port took %d of the request's %d bytes before failing; it may have reached the device", n, size)}
}

// settle waits until the line has carried no byte for the settle period
// (counted from now at the earliest), discarding what arrives: late
// replies to the command that got none. Bytes count, not lines: a reply
// still trickling in keeps the line busy.
func (d *Device) settle(ctx context.Context) error {
	start, drained := time.Now(), 0
	for {
		last := d.dec.lastInput()
		if start.After(last) {
			last = start
		}
		wait := time.Until(last.Add(d.settleFor))
		if wait <= 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return &devices.Error{Code: devices.CodeDeviceTimeout, Err: context.Cause(ctx),
				Message: fmt.Sprintf("the device did not fall silent after a command without a reply (%d lines drained); nothing was sent", drained)}
		case m := <-d.link.Recv():
			t.Stop()
			drained++
			d.log.Warn("late input from device discarded", "bytes", fmt.Sprintf("%q", serial.Truncate(m.Data, 64)))
		case <-t.C:
		}
	}
}

// attribute keeps listening for the settle period after a reply that came
// right after a command without one (or after every reply, with
// check_every_reply): a second reply line means one of the two was not
// this command's answer, and its outcome is unknown; so is it if the
// deadline cuts the window short.
func (d *Device) attribute(ctx context.Context, op opSpec, out json.RawMessage, err error) (json.RawMessage, error) {
	t := time.NewTimer(d.settleFor)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// The window was cut short: a second reply may still come, so
			// the one taken may not be this command's.
			d.suspect = true
			return nil, &devices.Error{Code: devices.CodeInDoubt, Err: context.Cause(ctx),
				Message: "the deadline ended the wait for a second reply; cannot tell whether the reply taken answers this command"}
		case <-t.C:
			return out, err
		case m := <-d.link.Recv():
			if kind, _, _ := op.match.match(string(m.Data)); m.Err == nil && kind != Other {
				d.suspect = true
				return nil, devices.Errorf(devices.CodeInDoubt,
					"two replies after a command that got none (%q last); cannot tell which answers this one", serial.Truncate(m.Data, 64))
			}
		}
	}
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
			return nil, &devices.Error{Code: devices.CodeInDoubt, Err: context.Cause(ctx),
				Message: "no reply matched (" + sk.String() + "); the request was sent and may have been applied"}
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
