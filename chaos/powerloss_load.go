package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
)

// The supervisors' load of a power-loss campaign.
const (
	plTTL        = 2 * time.Second        // their leases' TTL
	plCmdTimeout = 3 * time.Second        // how long one command is retried (same id) for an answer
	plCheckWait  = 8 * time.Second        // how long a re-send or a probe waits for its answer
	plAcquireMax = 2 * time.Second        // the longest acquire wait for a held domain
	plReleaseMax = 2 * plTTL              // how long a release waits for the controller
	plAcquireCap = plAcquireMax + 3*plTTL // how long an acquire waits for the controller
)

// plSup is one supervisor of the harness process: it takes leases on the
// domains in turn (waiting for one another, so leases are handed over and
// the domain fences rise) and commands the agent's devices through the SDK,
// recording every answer in the ledger. Now and then it writes once more
// with a lease it released (its old raw token).
type plSup struct {
	name    string
	c       *supervisor.Client
	r       *rand.Rand // its draws; only its run goroutine uses it
	domains []DomainPlan
	led     *ledger
}

// plCommand is one command a supervisor is about to send.
type plCommand struct {
	id, device, op string
	args           any
}

// run loops until ctx is done: acquire a domain, send a few batches of
// commands, release, maybe write once more under the released token.
func (s *plSup) run(ctx context.Context) {
	for ctx.Err() == nil {
		d := s.domains[s.r.IntN(len(s.domains))]
		l := s.acquire(ctx, d.Name)
		if l == nil {
			sleep(ctx, 50*time.Millisecond)
			continue
		}
		for n := 1 + s.r.IntN(4); n > 0 && l.Err() == nil && ctx.Err() == nil; n-- {
			s.batch(ctx, l, d)
			sleep(ctx, time.Duration(s.r.IntN(40))*time.Millisecond)
		}
		s.release(l)
		if s.r.IntN(4) == 0 && ctx.Err() == nil {
			s.sendRaw(ctx, l, s.command(d))
		}
	}
}

// acquire takes a lease on domain, waiting a drawn while if it is held.
func (s *plSup) acquire(ctx context.Context, domain string) *supervisor.Lease {
	wait := time.Duration(s.r.IntN(int(plAcquireMax/time.Millisecond))) * time.Millisecond
	actx, cancel := context.WithTimeout(ctx, plAcquireCap)
	defer cancel()
	l, err := s.c.Acquire(actx, domain, supervisor.AcquireOptions{TTL: plTTL, Wait: wait})
	if err != nil {
		return nil
	}
	s.led.addToken(l.Fence(), l.Token(), s.name)
	return l
}

// release gives l back (bounded; the lease is lost whatever the answer).
func (s *plSup) release(l *supervisor.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), plReleaseMax)
	defer cancel()
	_ = l.Release(ctx)
}

// batch sends one command, or a burst of 2–4 at once.
func (s *plSup) batch(ctx context.Context, l *supervisor.Lease, d DomainPlan) {
	if s.r.IntN(3) != 0 {
		s.send(ctx, l, s.command(d))
		return
	}
	var wg sync.WaitGroup
	for range 2 + s.r.IntN(3) {
		cmd := s.command(d) // drawn here: s.r is not shared with the goroutines
		wg.Go(func() { s.send(ctx, l, cmd) })
	}
	wg.Wait()
}

// command draws a command to a device of d: mostly set, some get
// (idempotent), some short pulses.
func (s *plSup) command(d DomainPlan) plCommand {
	c := plCommand{id: fmt.Sprintf("%s-%d", s.name, s.r.Uint64()), device: d.Devices[s.r.IntN(len(d.Devices))].ID}
	switch n := s.r.IntN(10); {
	case n < 7:
		c.op, c.args = "set", map[string]any{"value": s.r.IntN(1000)}
	case n < 9:
		c.op = "get"
	default:
		c.op, c.args = "pulse", map[string]any{"ms": s.r.IntN(30)}
	}
	return c
}

func (s *plSup) newAck(d string, cmd plCommand) *plAck {
	return &plAck{Sup: s.name, ID: cmd.id, Device: cmd.device, Domain: d, Op: cmd.op, Args: cmd.args,
		Idempotent: cmd.op == "get", Sent: time.Now()}
}

// send sends cmd under l (Lease.SendID: retried with the same id until an
// answer, ctx or the lease ends) and records the answer.
func (s *plSup) send(ctx context.Context, l *supervisor.Lease, cmd plCommand) {
	a := s.newAck(l.Domain(), cmd)
	a.setToken(l.Fence(), l.Token())
	cctx, cancel := context.WithTimeout(ctx, plCmdTimeout)
	defer cancel()
	res, _ := l.SendID(cctx, a.ID, a.Device, a.Op, a.Args) // an error is the result's code, or no answer
	s.led.answer(a, res)
}

// sendRaw sends cmd under l's raw token with Client.SendID, which does not
// care whether the lease is still held: a supervisor that released (or
// lost) its lease and writes once more.
func (s *plSup) sendRaw(ctx context.Context, l *supervisor.Lease, cmd plCommand) {
	a := s.newAck(l.Domain(), cmd)
	a.setToken(l.Fence(), l.Token())
	a.Stale = true
	cctx, cancel := context.WithTimeout(ctx, plCmdTimeout)
	defer cancel()
	res, _ := s.c.SendID(cctx, a.ID, a.Token, a.Device, a.Op, a.Args)
	s.led.answer(a, res)
}

// probe sends a fresh set to device dev of domain under the old token t
// through this supervisor, which held it, and records the answer; the
// ledger judges it (rule 2).
func (s *plSup) probe(ctx context.Context, domain, dev string, t leaseToken, cut int, r *rand.Rand) protocol.Code {
	cmd := plCommand{id: fmt.Sprintf("probe%d-%s-%d", cut, dev, r.Uint64()), device: dev,
		op: "set", args: map[string]any{"value": -cut}}
	a := s.newAck(domain, cmd)
	a.Token, a.Epoch, a.Seq, a.Probe = t.raw, t.pos[0], t.pos[1], true
	a.Holder = s.c.Holder()
	cctx, cancel := context.WithTimeout(ctx, plCheckWait)
	defer cancel()
	res, _ := s.c.SendID(cctx, a.ID, a.Token, a.Device, a.Op, a.Args)
	s.led.answer(a, res)
	return res.Code
}
