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
//   - ctx done (or the op's timeout) first → device_timeout; the port lost
//     after sending → in_doubt.
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
	if err := d.link.Send(ctx, frame); err != nil {
		return nil, sendError(err)
	}
	return d.await(ctx, cmd.ID, frame, lost)
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
			return nil, &devices.Error{Code: devices.CodeDeviceTimeout, Err: context.Cause(ctx),
				Message: fmt.Sprintf("no valid reply from the firmware (%d garbled frames received)", x.garbled)}
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
	if err := d.link.Send(ctx, x.frame); err != nil {
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
