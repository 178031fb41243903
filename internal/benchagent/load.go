package benchagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/fencegate/fencegate/internal/benchload"
	"github.com/fencegate/fencegate/protocol"
)

// Load is one measurement of commands through the agent.
type Load struct {
	Broker   string            // broker URL
	Tokens   *benchload.Tokens // signs the tokens; Commands grows it
	InFlight int               // concurrent senders, each waiting for its result
	// Advancing: a new token (next seq) on every command. Otherwise each
	// device has one token per run (steady), and every device is sent one
	// command with it, untimed, before the run: the run measures a token
	// the agent has verified and fenced at already, however few commands
	// each device gets (at 10,000 devices a quick run sends one or two).
	Advancing bool
	Limit     benchload.Limit // set Ops: advancing tokens are signed ahead for it
	Done      *atomic.Int64   // if set, counts the commands answered applied as they are
}

// Commands runs l against a: l.InFlight senders, sender s driving devices
// s, s+InFlight, … in turn, each command a "set" that must be answered
// applied/ok. With fewer devices than senders, senders are capped at the
// device count. Tokens are signed, and a steady run's tokens sent once per
// device, before timing starts. Commands must not run concurrently with
// itself on one Agent.
func (a *Agent) Commands(ctx context.Context, l Load) (benchload.Result, error) {
	senders := min(l.InFlight, a.devices)
	if senders < 1 || l.Limit.Ops < 1 {
		return benchload.Result{}, fmt.Errorf("%w: in flight %d, ops %d", ErrInvalid, l.InFlight, l.Limit.Ops)
	}
	base, err := a.prepare(l)
	if err != nil {
		return benchload.Result{}, err
	}
	cs, err := clients(l.Broker, min(senders, 4))
	if err != nil {
		return benchload.Result{}, err
	}
	defer closeAll(cs)
	if !l.Advancing {
		warm := l
		warm.Limit, warm.Done = benchload.Limit{Ops: a.devices}, nil
		if _, err := benchload.Run(ctx, senders, warm.Limit, a.sender(warm, cs, base, senders)); err != nil {
			return benchload.Result{}, fmt.Errorf("steady token warm-up: %w", err)
		}
	}
	return benchload.Run(ctx, senders, l.Limit, a.sender(l, cs, base, senders))
}

// sender returns the op of one Commands run: sender s's k-th command, to
// device s + (k mod its device count)·senders, with the device's token of
// base (steady) or its next one (advancing).
func (a *Agent) sender(l Load, cs []*rpcClient, base []int, senders int) benchload.Op {
	a.runs++
	run := a.runs
	return func(ctx context.Context, s, k int) error {
		dev := s + (k%owned(a.devices, senders, s))*senders
		idx := base[dev]
		if l.Advancing {
			idx = a.next[dev]
			a.next[dev]++
		}
		cmd := protocol.Command{ID: "r" + strconv.Itoa(run) + "-" + strconv.Itoa(s) + "-" + strconv.Itoa(k), Token: l.Tokens.At(dev, idx).Raw,
			Op: "set", Args: json.RawMessage(`{"value":` + strconv.Itoa(k) + `}`)}
		r, err := cs[s%len(cs)].call(ctx, protocol.Topics{}.DeviceCommands(benchload.DeviceID(dev)), cmd)
		if err != nil {
			return err
		}
		if r.Status != protocol.StatusApplied || r.Code != protocol.CodeOK {
			return fmt.Errorf("%w: %s on %s: %s/%s (%s)", ErrOutcome, cmd.ID, benchload.DeviceID(dev), r.Status, r.Code, r.Message)
		}
		if l.Done != nil {
			l.Done.Add(1)
		}
		return nil
	}
}

// owned is the number of the devices sender s of senders drives.
func owned(devices, senders, s int) int { return (devices - s + senders - 1) / senders }

// prepare signs the tokens the run needs and returns, per device, the
// token index a steady run uses (one new position per device per run, so a
// steady run never follows an advancing one at a lower position).
func (a *Agent) prepare(l Load) ([]int, error) {
	perDevice := 1
	if l.Advancing {
		perDevice = l.Limit.Ops/a.devices + 1
	}
	need := 0
	for _, n := range a.next {
		need = max(need, n+perDevice)
	}
	if err := l.Tokens.Grow(a.devices, need); err != nil {
		return nil, err
	}
	base := make([]int, a.devices)
	if !l.Advancing {
		for dev := range base {
			base[dev] = a.next[dev]
			a.next[dev]++
		}
	}
	return base, nil
}
