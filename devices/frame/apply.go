package frame

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/transport/serial"
)

// maxResends bounds how often one request is sent again after a garbled
// reply. The firmware answers a repeated command id from its reply cache
// without applying it again, so a resend is safe.
const maxResends = 2

// Apply sends cmd to the firmware and waits for the reply with its id:
//
//   - an op not configured → unknown_op; a command too large for a frame →
//     device_error;
//   - no port (unplugged, reopening) → device_unavailable: nothing was sent;
//   - the reply: applied → its output; error → device_error with the
//     firmware's message; stale → stale_token with the firmware's fence;
//   - a garbled reply is logged and the request resent (same id) up to
//     maxResends times; replies to other ids (late answers to timed-out
//     commands) are logged and skipped;
//   - the port did not take any of the request in time → device_timeout:
//     nothing was sent;
//   - ctx done (or the op's timeout) after bytes of the request were
//     handed to the port, a partial write, or the port lost after sending
//     → in_doubt. The unsent rest is discarded first (TCOFLUSH), so once
//     Apply has answered, the frame can no longer reach the firmware; a
//     prefix of it that did can never be completed into a valid frame,
//     because the next request starts with serial.CutGuard.
func (d *Device) Apply(ctx context.Context, cmd devices.Command) (json.RawMessage, error) {
	op, ok := d.ops[cmd.Op]
	if !ok {
		return nil, devices.Errorf(devices.CodeUnknownOp, "device %q has no op %q", d.id, cmd.Op)
	}
	if op.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, op.Timeout)
		defer cancel()
	}
	frame, err := request(cmd)
	if err != nil {
		return nil, err
	}
	d.link.Flush()
	lost := d.link.Lost()
	wire := d.guarded(frame)
	if n, err := d.link.Send(ctx, wire); err != nil {
		return nil, d.sendFailed(frame, n, len(wire), err)
	}
	d.cut = frame
	out, err := d.await(ctx, cmd.ID, frame, lost)
	if devices.CodeOf(err) == devices.CodeInDoubt {
		d.link.DropOutput()
	}
	return out, err
}

// guarded returns frame, preceded by a guard byte if the frame sent before
// it may have been cut short on the wire.
func (d *Device) guarded(frame []byte) []byte {
	if d.cut == nil {
		return frame
	}
	return append([]byte{serial.CutGuard(d.cut)}, frame...)
}

// sendFailed maps a failed send of wire (n of size bytes taken). The frame
// counts as cut if any of it may have gone out.
func (d *Device) sendFailed(frame []byte, n, size int, err error) error {
	if n > size-len(frame) {
		d.cut = frame
	}
	if n > 0 {
		return &devices.Error{Code: devices.CodeInDoubt, Err: err,
			Message: fmt.Sprintf("the port took %d of the request's %d bytes before failing; it may have reached the device", n, size)}
	}
	return sendError(err)
}

// exchange is the state of one request waiting for its reply.
type exchange struct {
	id      string
	frame   []byte
	resends int
	garbled int
}

func (d *Device) await(ctx context.Context, id string, frame []byte, lost <-chan struct{}) (json.RawMessage, error) {
	x := &exchange{id: id, frame: frame}
	for {
		select {
		case <-ctx.Done():
			return nil, &devices.Error{Code: devices.CodeInDoubt, Err: context.Cause(ctx),
				Message: fmt.Sprintf("no valid reply from the firmware (%d garbled frames received); the request was sent and may have been applied", x.garbled)}
		case <-lost:
			return nil, devices.Errorf(devices.CodeInDoubt, "port lost after the request was sent; it may have been applied")
		case m := <-d.link.Recv():
			if rep, done := d.handle(ctx, x, m); done {
				return outcome(rep)
			}
		}
	}
}

// handle takes one message; it returns the reply and true once x's reply
// arrived.
func (d *Device) handle(ctx context.Context, x *exchange, m serial.Msg) (Reply, bool) {
	rep, err := parse(m)
	if err != nil {
		x.garbled++
		d.log.Warn("garbled input from firmware", "id", x.id, "err", err, "bytes", fmt.Sprintf("%q", serial.Truncate(m.Data, 64)))
		d.resend(ctx, x)
		return Reply{}, false
	}
	if rep.ID != x.id {
		d.log.Warn("reply for another command skipped (late answer?)", "id", x.id, "reply_id", rep.ID)
		return Reply{}, false
	}
	d.cut = nil
	return rep, true
}

func parse(m serial.Msg) (Reply, error) {
	if m.Err != nil {
		return Reply{}, m.Err
	}
	return ParseReply(m.Data)
}

func (d *Device) resend(ctx context.Context, x *exchange) {
	if x.resends >= maxResends {
		return
	}
	x.resends++
	if _, err := d.link.Send(ctx, x.frame); err != nil {
		d.log.Warn("resend failed", "id", x.id, "err", err)
	}
}

// outcome maps the firmware's reply to Apply's result.
func outcome(r Reply) (json.RawMessage, error) {
	switch r.Status {
	case StatusApplied:
		return output(r.Body)
	case StatusStale:
		return nil, staleError(r)
	case StatusUnknownOp:
		return nil, devices.Errorf(devices.CodeUnknownOp, "firmware has no such op: %s", r.Body)
	case StatusBadRequest:
		return nil, devices.Errorf(devices.CodeDeviceError, "firmware could not parse the request: %s", r.Body)
	}
	return nil, devices.Errorf(devices.CodeDeviceError, "%s", r.Body)
}

// output is the op's output: the firmware's JSON object, or {"raw": text}
// when the firmware sent something else.
func output(body []byte) (json.RawMessage, error) {
	if len(body) == 0 {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		// Applied all the same: keep what the firmware said, as text.
		raw, _ := json.Marshal(map[string]string{"raw": string(body)})
		return raw, nil
	}
	return json.RawMessage(body), nil
}
