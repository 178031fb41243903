package chaos

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/fencegate/fencegate/chaos/check"
	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
)

// probe checks progress once every fault healed: for each domain it
// acquires (waiting) and applies one set on every device, retrying until
// bound, and records it all as check.ProbeProc. The checker judges it;
// probe returns errProbeStuck if the bound ran out first.
func probe(ctx context.Context, plan Plan, broker string, rec *history.Writer, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	c, err := dialSupervisor(ctx, broker, check.ProbeProc)
	if err != nil {
		return err
	}
	defer c.Close()
	w := &worker{plan: plan, me: SupervisorPlan{Name: check.ProbeProc}, c: c, rec: rec,
		r: rand.New(rand.NewPCG(plan.Seed, 99)), kept: map[string]*supervisor.Lease{}, released: map[*supervisor.Lease]bool{}}
	for _, d := range plan.Domains {
		w.probeDomain(ctx, d)
	}
	if ctx.Err() != nil {
		return errProbeStuck
	}
	return nil
}

// errProbeStuck: the probe did not finish within its bound.
var errProbeStuck = errors.New("chaos: the progress probe did not finish")

// probeDomain acquires d (again, if the lease is lost) and applies a set on
// each of its devices until one is ok or ctx ends.
func (w *worker) probeDomain(ctx context.Context, d DomainPlan) {
	var l *supervisor.Lease
	for _, dev := range d.Devices {
		for ctx.Err() == nil {
			if l == nil || l.Err() != nil {
				if l = w.acquire(ctx, d.Name, 3*w.plan.TTL); l == nil {
					sleep(ctx, 200*time.Millisecond)
					continue
				}
			}
			if w.send(ctx, l, w.newID(), dev.ID, "set", map[string]any{"value": "probe"}) == protocol.CodeOK {
				break
			}
			sleep(ctx, 200*time.Millisecond)
		}
	}
	if l != nil {
		w.release(ctx, l)
	}
}
