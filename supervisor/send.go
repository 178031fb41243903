package supervisor

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// SendToken sends a command with a fresh id under token and waits for its
// result; see SendID.
func (c *Client) SendToken(ctx context.Context, token, device, op string, args any) (mqtt.Result, error) {
	return c.SendID(ctx, randomID(), token, device, op, args)
}

// SendID sends command id to device and waits for its result, sending it
// again with the same id after each retry interval (and while the device
// answers busy) until a result comes or ctx ends. Because the id stays the
// same, the agent applies the command at most once; a lost reply is
// recovered by the next resend. An applied result returns a nil error;
// any other result returns it with a *ResultError. If ctx ends first the
// error wraps ErrNoResult (or ErrBusy if the device only ever answered
// busy): the command may or may not have been applied — send the same id
// again to learn its fate.
func (c *Client) SendID(ctx context.Context, id, token, device, op string, args any) (mqtt.Result, error) {
	if err := fence.CheckID("device", device); err != nil {
		return mqtt.Result{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	cmd := mqtt.Command{ID: id, Token: token, Op: op, ReplyTo: c.reply}
	if args != nil {
		raw, err := json.Marshal(args)
		if err != nil {
			return mqtt.Result{}, fmt.Errorf("%w: args: %v", ErrBadRequest, err)
		}
		cmd.Args = raw
	}
	payload, err := json.Marshal(cmd)
	if err != nil {
		return mqtt.Result{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	reply, err := c.exchange(ctx, id, c.topics.DeviceCommands(device), payload, 0, notBusy)
	var res mqtt.Result
	if reply != nil {
		if uerr := json.Unmarshal(reply, &res); uerr != nil {
			return res, fmt.Errorf("%w: undecodable result: %v", ErrInternal, uerr)
		}
	}
	if err != nil {
		if res.Code == mqtt.CodeBusy {
			return res, fmt.Errorf("%w: command %s: %w", ErrBusy, id, err)
		}
		return res, fmt.Errorf("%w: command %s to %s (it may or may not have been applied): %w", ErrNoResult, id, device, err)
	}
	return res, resultError(res)
}

// notBusy accepts every result but busy, which is retried.
func notBusy(reply []byte) bool {
	var r struct {
		Code mqtt.Code `json:"code"`
	}
	return json.Unmarshal(reply, &r) != nil || r.Code != mqtt.CodeBusy
}
