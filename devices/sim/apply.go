package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
)

// Apply applies cmd as a token-aware device would, in this order:
//
//   - an op the device lacks → unknown_op; a Config.Unavailable device →
//     device_unavailable;
//   - args that are not a JSON object (or absent), or wrong for the op →
//     device_error;
//   - a closed device → device_unavailable; a zero token → device_error; a
//     token older than the device's own fence for its domain (or at the
//     fence with another holder) → stale_token with Error.Fence set;
//   - injected failures (Config.FailEvery, Config.TimeoutEvery);
//   - the op's latency (and a pulse's hold), waited on a timer: if ctx is
//     done first, device_timeout;
//   - commit: raise the fence (fsynced to the fence file first, if any),
//     append the apply log line, change the state, return the output.
//
// Every failure leaves state, fence and log unchanged. Apply returns soon
// after ctx is done.
func (d *Device) Apply(ctx context.Context, cmd devices.Command) (json.RawMessage, error) {
	op, ok := d.ops[cmd.Op]
	switch {
	case !ok:
		return nil, devices.Errorf(devices.CodeUnknownOp, "device %q has no op %q", d.id, cmd.Op)
	case d.cfg.Unavailable:
		return nil, devices.Errorf(devices.CodeDeviceUnavailable, "device %q is configured unavailable", d.id)
	}
	args, err := parseArgs(op.name, cmd.Args)
	if err != nil {
		return nil, err
	}
	act, err := op.prepare(args)
	if err != nil {
		return nil, err
	}
	started := time.Now().UTC()
	n, err := d.admit(cmd.Token)
	if err != nil {
		return nil, err
	}
	if err := d.inject(ctx, n); err != nil {
		return nil, err
	}
	if err := hold(ctx, op.latency+act.hold); err != nil {
		return nil, err
	}
	return d.commit(cmd, op, act, started)
}

// admit checks tok against the device's fence and counts the attempt; it
// returns the attempt's number, from 1.
func (d *Device) admit(tok fence.Token) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(tok); err != nil {
		return 0, err
	}
	d.attempts++
	return d.attempts, nil
}

// checkLocked refuses tok if the device is closed or tok is stale. d.mu is held.
func (d *Device) checkLocked(tok fence.Token) error {
	switch {
	case d.closed:
		return devices.Errorf(devices.CodeDeviceUnavailable, "device %q is closed", d.id)
	case tok.IsZero():
		return devices.Errorf(devices.CodeDeviceError, "device %q: command carries no token", d.id)
	case !d.cfg.NoFence && !d.fences.admits(tok):
		f := d.fences[tok.Domain]
		return &devices.Error{
			Code:    devices.CodeStaleToken,
			Message: "token " + tok.String() + " is older than the device's fence",
			Fence:   &f,
		}
	}
	return nil
}

// inject fails the nth attempt as Config.FailEvery and TimeoutEvery say.
func (d *Device) inject(ctx context.Context, n int) error {
	if every := d.cfg.TimeoutEvery; every > 0 && n%every == 0 {
		<-ctx.Done()
		return timeoutError(ctx, "injected timeout")
	}
	if every := d.cfg.FailEvery; every > 0 && n%every == 0 {
		return devices.Errorf(devices.CodeDeviceError, "injected failure (apply %d, fail_every %d)", n, every)
	}
	return nil
}

// hold waits for dur, or returns device_timeout once ctx is done (also if
// it is done already).
func hold(ctx context.Context, dur time.Duration) error {
	if ctx.Err() != nil {
		return timeoutError(ctx, "context done before apply")
	}
	if dur <= 0 {
		return nil
	}
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return timeoutError(ctx, "context done after "+dur.String()+" apply started")
	}
}

func timeoutError(ctx context.Context, msg string) error {
	return &devices.Error{Code: devices.CodeDeviceTimeout, Message: msg, Err: context.Cause(ctx)}
}

// commit raises the fence, logs and applies act, all under d.mu, so that
// the fence check and the apply are one step. started is when Apply
// admitted cmd, for the log.
func (d *Device) commit(cmd devices.Command, op opSpec, act action, started time.Time) (json.RawMessage, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(cmd.Token); err != nil {
		return nil, err
	}
	if err := d.raiseLocked(cmd.Token); err != nil {
		return nil, err
	}
	if d.applyLog != nil {
		if err := appendEntry(d.applyLog, d.entry(cmd, op, started)); err != nil {
			return nil, &devices.Error{Code: devices.CodeDeviceError, Message: err.Error(), Err: err}
		}
	}
	out := act.run(&d.state)
	d.log.Debug("applied", "id", cmd.ID, "op", cmd.Op, "token", cmd.Token.String())
	return out, nil
}

// raiseLocked moves the fence to tok, storing it first in the fence file if
// configured. d.mu is held.
func (d *Device) raiseLocked(tok fence.Token) error {
	fm, moved := d.fences.raised(tok)
	if !moved {
		return nil
	}
	if d.cfg.FenceFile != "" {
		if err := fm.store(d.cfg.FenceFile); err != nil {
			return &devices.Error{Code: devices.CodeDeviceError, Message: err.Error(), Err: err}
		}
	}
	d.fences = fm
	return nil
}

// entry is the apply log line of cmd.
func (d *Device) entry(cmd devices.Command, op opSpec, started time.Time) Entry {
	args := bytes.TrimSpace(cmd.Args)
	if len(args) == 0 {
		args = nil
	}
	return Entry{
		Device: d.id, ID: cmd.ID, Op: cmd.Op, Idempotent: op.idempotent,
		Domain: cmd.Token.Domain, Epoch: cmd.Token.Epoch, Seq: cmd.Token.Seq, Holder: cmd.Token.Holder,
		Args: args, Started: started, At: time.Now().UTC(),
	}
}
