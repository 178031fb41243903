package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// SendToken sends a command with a fresh id under token and waits for its
// result; see SendID.
func (c *Client) SendToken(ctx context.Context, token, device, op string, args any) (protocol.Result, error) {
	return c.SendID(ctx, randomID(), token, device, op, args)
}

// SendID sends command id to device and waits for its result, sending it
// again with the same id after each retry interval (and while the device
// answers busy) until a result comes or ctx ends. Because the id stays the
// same, the agent applies the command at most once; a lost reply is
// recovered by the next resend. The command carries ctx's deadline, if
// any, as deadline_ms: the agent does not apply it later (it answers
// expired). An applied result returns a nil error; any other result
// returns it with a *ResultError. If ctx ends first the error wraps
// ErrNoResult (or ErrBusy if the device only ever answered busy): the
// command may or may not have been applied — send the same id again to
// learn its fate.
func (c *Client) SendID(ctx context.Context, id, token, device, op string, args any) (protocol.Result, error) {
	deadline, _ := ctx.Deadline()
	return c.sendCommand(ctx, protocol.Command{ID: id, Token: token, Op: op}, device, args, deadline)
}

// sendCommand fills cmd's args, reply topic and deadline_ms (unless
// deadline is zero) and runs the exchange of SendID.
func (c *Client) sendCommand(ctx context.Context, cmd protocol.Command, device string, args any, deadline time.Time) (protocol.Result, error) {
	if err := fence.CheckID("device", device); err != nil {
		return protocol.Result{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	payload, err := commandPayload(cmd, c.reply, args, deadline)
	if err != nil {
		return protocol.Result{}, err
	}
	reply, err := c.exchange(ctx, cmd.ID, c.topics.DeviceCommands(device), payload, 0, notBusy)
	var res protocol.Result
	if reply != nil {
		if uerr := json.Unmarshal(reply, &res); uerr != nil {
			return res, fmt.Errorf("%w: undecodable result: %w", ErrInternal, uerr)
		}
	}
	if err != nil {
		if res.Code == protocol.CodeBusy {
			return res, fmt.Errorf("%w: command %s: %w", ErrBusy, cmd.ID, err)
		}
		return res, fmt.Errorf("%w: command %s to %s (it may or may not have been applied): %w", ErrNoResult, cmd.ID, device, err)
	}
	return res, resultError(res)
}

// commandPayload encodes cmd with args, replyTo and deadline (zero: none).
func commandPayload(cmd protocol.Command, replyTo string, args any, deadline time.Time) ([]byte, error) {
	cmd.ReplyTo = replyTo
	if !deadline.IsZero() {
		cmd.DeadlineMs = deadline.UnixMilli()
	}
	if args != nil {
		raw, err := json.Marshal(args)
		if err != nil {
			return nil, fmt.Errorf("%w: args: %w", ErrBadRequest, err)
		}
		cmd.Args = raw
	}
	payload, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return payload, nil
}

// notBusy accepts every result but busy, which is retried.
func notBusy(reply []byte) bool {
	var r struct {
		Code protocol.Code `json:"code"`
	}
	return json.Unmarshal(reply, &r) != nil || r.Code != protocol.CodeBusy
}
