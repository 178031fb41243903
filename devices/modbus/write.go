package modbus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
)

// write sends a write set in the order planWrite gives, the fence first.
func (d *Device) write(ctx context.Context, cmd devices.Command, w *writeSet) error {
	f := d.spec.fence
	var block []uint16
	if f != nil {
		block = f.block(cmd.Token)
	}
	reqs := planWrite(w, f, block, d.spec.maxRegs)
	applied := 0 // requests carrying values that the device confirmed
	for i, r := range reqs {
		err := d.conn.roundTrip(ctx, r.pdu, func(res PDU) error { return checkWriteEcho(r.pdu, res) })
		if err == nil && r.fence && f.status != nil {
			err = d.verdict(ctx, cmd.Token)
		}
		if err != nil {
			return d.writeFailed(ctx, cmd.Token, reqs, i, applied, err)
		}
		if r.values {
			applied++
		}
	}
	return nil
}

// writeFailed maps the failure of request i of reqs, after applied
// requests with values took effect.
func (d *Device) writeFailed(ctx context.Context, tok fence.Token, reqs []request, i, applied int, err error) error {
	r := reqs[i]
	what := fmt.Sprintf("request %d of %d (function %#02x)", i+1, len(reqs), r.pdu.Function)
	var de *devices.Error
	var exc *ExceptionError
	var le *linkError
	switch {
	case errors.As(err, &de):
		return de
	case applied > 0:
		return &devices.Error{Code: devices.CodeInDoubt, Err: err,
			Message: fmt.Sprintf("%s failed (%v) after %d requests with values took effect: the device holds part of the command", what, err, applied)}
	case errors.As(err, &exc) && exc.MayHaveActed() && r.values:
		return &devices.Error{Code: devices.CodeInDoubt, Err: err,
			Message: fmt.Sprintf("%s answered %s: the device may have written the values", what, exc.Name())}
	case r.fence && errors.As(err, &exc):
		return d.fenceRefused(ctx, tok, exc)
	case errors.As(err, &le) && le.sent && r.values:
		return &devices.Error{Code: devices.CodeInDoubt, Err: err,
			Message: fmt.Sprintf("%s: %v; it may have reached the device", what, err)}
	case errors.As(err, &exc):
		return &devices.Error{Code: devices.CodeDeviceError, Err: err, Message: fmt.Sprintf("%s refused: %s", what, exc.Name())}
	case errors.As(err, &le):
		return &devices.Error{Code: le.code, Err: err, Message: fmt.Sprintf("%s: %v; no value was written", what, err)}
	}
	return &devices.Error{Code: devices.CodeDeviceError, Err: err, Message: what + ": " + err.Error()}
}

// fenceRefused explains an exception to the fence request: stale_token if
// the PLC's fence, read back, is above the token; otherwise the exception.
func (d *Device) fenceRefused(ctx context.Context, tok fence.Token, exc *ExceptionError) error {
	pf, err := d.readFence(ctx)
	if err == nil && pf.newerThan(tok) {
		return staleError(pf, tok)
	}
	msg := "the PLC refused the fence write: " + exc.Name()
	if err != nil {
		msg += fmt.Sprintf(" (reading its fence back failed: %v)", err)
	}
	return &devices.Error{Code: devices.CodeDeviceError, Message: msg + "; no value was written", Err: exc}
}

// readFence reads the PLC's fence block.
func (d *Device) readFence(ctx context.Context) (plcFence, error) {
	f := d.spec.fence
	w, err := d.readRun(ctx, readRun{table: Holding, addr: f.addr, n: f.n})
	return plcFence{words: w, f: f}, err
}

func staleError(pf plcFence, tok fence.Token) error {
	f := pf.fence()
	return &devices.Error{Code: devices.CodeStaleToken, Fence: &f,
		Message: fmt.Sprintf("the PLC's own fence is %s, above this token's (epoch %d seq %d); nothing written", pf, tok.Epoch, tok.Seq)}
}

// verdict polls the fence status register until the PLC program has judged
// the fence just written: nil once accepted, stale_token if refused. No
// value has been written yet, so every failure here leaves the command
// without effect.
func (d *Device) verdict(ctx context.Context, tok fence.Token) error {
	f := d.spec.fence
	vctx, cancel := context.WithTimeout(ctx, f.StatusTimeout)
	defer cancel()
	for {
		w, err := d.readRun(vctx, readRun{table: Holding, addr: *f.status, n: 1})
		if err != nil {
			return fmt.Errorf("reading the fence status: %w", err)
		}
		switch w[0] {
		case StatusAccepted:
			return nil
		case StatusStale:
			return d.staleVerdict(ctx, tok)
		case StatusPending:
		default:
			return devices.Errorf(devices.CodeDeviceError, "the PLC's fence status is %d (not 0, 1 or 2); no value was written", w[0])
		}
		if err := sleep(vctx, f.Poll); err != nil {
			return notSent(devices.CodeDeviceTimeout, fmt.Sprintf("the PLC gave no verdict on the fence within %v", f.StatusTimeout), err)
		}
	}
}

func (d *Device) staleVerdict(ctx context.Context, tok fence.Token) error {
	pf, err := d.readFence(ctx)
	if err != nil {
		return &devices.Error{Code: devices.CodeStaleToken, Err: err,
			Message: fmt.Sprintf("the PLC's own fence refused this token (epoch %d seq %d); reading its fence back failed: %v; nothing written", tok.Epoch, tok.Seq, err)}
	}
	return staleError(pf, tok)
}

// sleep waits d or until ctx is done (its cause).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
