package benchload

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/persist"
)

// AcceptLoad is the agent's workload: each operation is one Store.Accept of
// a new command id, durable before it returns. Its methods are safe for
// concurrent use; Op for one device must not run concurrently with itself.
type AcceptLoad struct {
	store   *persist.Store
	tokens  *Tokens
	steady  bool
	devices []string

	commits, committed, raised atomic.Int64
}

// OpenAcceptLoad opens (creating) the store file at path with default
// options and returns the workload for devices devices on it. With steady,
// every command carries tokens.At(dev, 0), one lease as between lease
// changes; otherwise device's i-th command carries tokens.At(dev, i) and
// raises its domain's fence while the pool lasts (Grow it for the devices
// and the operations per device first).
func OpenAcceptLoad(path string, tokens *Tokens, devices int, steady bool) (*AcceptLoad, error) {
	if devices < 1 {
		return nil, fmt.Errorf("%w: devices %d", ErrInvalid, devices)
	}
	l := &AcceptLoad{tokens: tokens, steady: steady, devices: make([]string, devices)}
	for i := range l.devices {
		l.devices[i] = DeviceID(i)
	}
	s, err := persist.Open(path, persist.Options{OnCommit: l.onCommit})
	if err != nil {
		return nil, fmt.Errorf("accept load: %w", err)
	}
	l.store = s
	return l, nil
}

func (l *AcceptLoad) onCommit(ops int, _ time.Duration) {
	l.commits.Add(1)
	l.committed.Add(int64(ops))
}

// Op is an Op: it accepts command CommandID(i) of device DeviceID(dev) and
// fails with ErrOutcome unless the answer is Accepted.
func (l *AcceptLoad) Op(ctx context.Context, dev, i int) error {
	tok := l.tokens.At(dev, 0)
	if !l.steady {
		tok = l.tokens.At(dev, i)
	}
	d, err := l.store.Accept(ctx, persist.Command{Device: l.devices[dev], ID: CommandID(i), Token: tok})
	if err != nil {
		return err
	}
	if d.Outcome != persist.Accepted {
		return fmt.Errorf("%w: %s/%s: %v", ErrOutcome, l.devices[dev], CommandID(i), d.Outcome)
	}
	if d.Raised {
		l.raised.Add(1)
	}
	return nil
}

// Commits returns the number of commits so far and the operations they held
// (from persist's Options.OnCommit).
func (l *AcceptLoad) Commits() (commits, ops int64) { return l.commits.Load(), l.committed.Load() }

// Raised returns how many operations raised their device's fence.
func (l *AcceptLoad) Raised() int64 { return l.raised.Load() }

// Close closes the store; call it once no Op is running.
func (l *AcceptLoad) Close() error { return l.store.Close() }

// DeviceID names device dev of a workload.
func DeviceID(dev int) string { return fmt.Sprintf("dev-%03d", dev) }

// CommandID names a device's i-th command.
func CommandID(i int) string { return "cmd-" + strconv.Itoa(i) }
