package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/protocol"
)

// Errors of in-doubt resolution; test with errors.Is.
var (
	// ErrUnknownDevice: the device is not one of the agent's.
	ErrUnknownDevice = errors.New("agent: unknown device")
	// ErrNotInDoubt: the command is not an open in-doubt command of the
	// device (persist.ErrNotInDoubt).
	ErrNotInDoubt = persist.ErrNotInDoubt
)

// InDoubtCommand is one entry of GET /v1/indoubt: an open in-doubt command
// an operator should check at the machine and resolve.
type InDoubtCommand struct {
	Device     string          `json:"device"`
	ID         string          `json:"id"`
	Op         string          `json:"op"`
	Args       json.RawMessage `json:"args,omitempty"`
	Holder     string          `json:"holder"` // the token holder that sent it
	Fence      fence.Fence     `json:"fence"`  // the token's (epoch, seq, holder)
	AcceptedAt time.Time       `json:"accepted_at"`
	// Result is the in-doubt answer the sender got, if the driver gave one
	// (the command was not interrupted by a stop of the agent).
	Result *protocol.Result `json:"result,omitempty"`
}

// Resolution is the body of POST /v1/indoubt/{device}/{id}/resolve.
type Resolution struct {
	// Resolution is "applied" or "not_applied".
	Resolution string `json:"resolution"`
	// By names who checked the machine (1..128 bytes).
	By string `json:"by"`
}

// Resolution values.
const (
	ResolvedApplied    = "applied"
	ResolvedNotApplied = "not_applied"
)

// InDoubt lists the open in-doubt commands of the agent's store.
func (a *Agent) InDoubt() ([]InDoubtCommand, error) {
	cmds, err := a.env.store.InDoubt()
	if err != nil {
		return nil, err
	}
	out := make([]InDoubtCommand, 0, len(cmds))
	for _, c := range cmds {
		out = append(out, inDoubtEntry(c))
	}
	return out, nil
}

func inDoubtEntry(c persist.InDoubtCommand) InDoubtCommand {
	r := c.Record
	e := InDoubtCommand{Device: c.Device, ID: r.ID, Op: r.Op, Holder: r.Token.Holder, Fence: r.Token, AcceptedAt: r.AcceptedAt.UTC()}
	if len(r.Args) > 0 && json.Valid(r.Args) {
		e.Args = r.Args
	}
	var res protocol.Result
	if len(r.Result) > 0 && json.Unmarshal(r.Result, &res) == nil {
		e.Result = &res
	}
	return e
}

// Resolve journals an operator's resolution of an open in-doubt command of
// one of the agent's devices (durably, with who and when) and returns the
// result a retry of the command is answered with from then on. It may be
// called concurrently with everything else.
func (a *Agent) Resolve(ctx context.Context, device, id string, res Resolution) (protocol.Result, error) {
	d := a.byID[device]
	if d == nil {
		return protocol.Result{}, fmt.Errorf("%w: %q", ErrUnknownDevice, device)
	}
	applied, err := res.applied()
	if err != nil {
		return protocol.Result{}, err
	}
	r := d.resolvedResult(id, applied, res.By, time.Now())
	rec, err := a.env.store.Resolve(ctx, device, id, persist.Resolution{Applied: applied, By: res.By}, mustJSON(r))
	if err != nil {
		return protocol.Result{}, fmt.Errorf("resolve %s/%s: %w", device, id, err)
	}
	d.log.Info("in-doubt command resolved", "id", id, "resolution", res.Resolution, "by", res.By,
		"holder", rec.Token.Holder, "op", rec.Op)
	return r, nil
}

func (res Resolution) applied() (bool, error) {
	switch res.Resolution {
	case ResolvedApplied:
		return true, nil
	case ResolvedNotApplied:
		return false, nil
	}
	return false, fmt.Errorf("%w: resolution %q is not %q or %q", persist.ErrInvalid, res.Resolution, ResolvedApplied, ResolvedNotApplied)
}

// resolvedResult is the answer to a retry of a resolved command: applied/ok
// if the operator found it applied; failed/device_error if not — failed is
// protocol v1's "did not take effect and never will", and device_error the
// failed code that claims nothing about reachability or deadlines. The
// message says who resolved it and when (docs/protocol.md).
func (d *device) resolvedResult(id string, applied bool, by string, at time.Time) protocol.Result {
	when := at.UTC().Format(time.RFC3339)
	if applied {
		return d.result(id, protocol.StatusApplied, protocol.CodeOK,
			fmt.Sprintf("in doubt, resolved applied by %s at %s after checking the device", by, when))
	}
	return d.result(id, protocol.StatusFailed, protocol.CodeDeviceError,
		fmt.Sprintf("in doubt, resolved not_applied by %s at %s after checking the device: it did not take effect", by, when))
}
