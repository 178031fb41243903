package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/chaos/netproxy"
)

// injector plays a plan's faults against an installation and records each.
type injector struct {
	in  *install
	rec *history.Writer

	mu     sync.Mutex
	active map[string]bool // "class/target" of faults in progress
	healed int64           // when the last fault healed
	errs   []error         // harness errors (a fault that could not be injected or healed)
	wg     sync.WaitGroup
}

// class groups fault kinds that cannot overlap on one target.
func class(kind string) string {
	switch kind {
	case FaultPartition, FaultReset, FaultDelay:
		return "link"
	case FaultUnplug, FaultStall:
		return "line"
	}
	return "proc"
}

// run injects every fault at its time from start; it returns when all
// faults have healed (or ctx is done, after healing what is active).
func (j *injector) run(ctx context.Context, start time.Time, faults []FaultPlan) {
	for _, f := range faults {
		if !sleepUntil(ctx, start.Add(f.At)) {
			break
		}
		key := class(f.Kind) + "/" + f.Target
		j.mu.Lock()
		busy := j.active[key] || f.Target == ""
		if !busy {
			j.active[key] = true
		}
		j.mu.Unlock()
		if busy {
			continue
		}
		j.wg.Add(1)
		go func() {
			defer j.wg.Done()
			j.play(ctx, f)
			j.mu.Lock()
			delete(j.active, key)
			j.mu.Unlock()
		}()
	}
	j.wg.Wait()
}

// play injects f, holds it for f.For, heals it, and records it.
func (j *injector) play(ctx context.Context, f FaultPlan) {
	rec := history.Fault{Kind: f.Kind, Target: f.Target, Start: history.Now()}
	heal, err := j.inject(ctx, f)
	if errors.Is(err, errNothingToFault) {
		return // not injected, so not recorded: it explains nothing
	}
	if err != nil {
		j.fail(fmt.Errorf("inject %s on %s: %w", f.Kind, f.Target, err))
		return
	}
	if heal != nil {
		sleepFor(ctx, f.For) // a fault ends early only when the run is cancelled
		if err := heal(); err != nil {
			j.fail(fmt.Errorf("heal %s on %s: %w", f.Kind, f.Target, err))
		}
	}
	rec.End = history.Now()
	if f.Kind == FaultDelay {
		rec.Detail = f.Delay.String()
	}
	j.mu.Lock()
	j.healed = max(j.healed, rec.End)
	j.mu.Unlock()
	if err := j.rec.Write(rec); err != nil {
		j.fail(err)
	}
}

func (j *injector) fail(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.errs = append(j.errs, err)
}

// inject starts fault f and returns how to heal it (nil for an instant fault).
func (j *injector) inject(ctx context.Context, f FaultPlan) (func() error, error) {
	in := j.in
	switch f.Kind {
	case FaultStop:
		p := in.sups[f.Target]
		if err := p.signal(syscall.SIGSTOP); err != nil {
			return nil, err
		}
		return func() error { return p.signal(syscall.SIGCONT) }, nil
	case FaultKillAgent, FaultKillCtrl, FaultKillBroker:
		p := in.procNamed(f.Target)
		if p == nil {
			return nil, fmt.Errorf("no process %q", f.Target)
		}
		p.kill()
		return func() error { return p.start(ctx) }, nil
	case FaultPartition, FaultReset, FaultDelay:
		return linkFault(in.proxies[f.Target], f)
	case FaultUnplug, FaultStall:
		fw := in.firmware[f.Target]
		on, off := "unplug", "plug"
		if f.Kind == FaultStall {
			on, off = "stall", "resume"
		}
		if _, err := fw.control(on); err != nil {
			return nil, err
		}
		return func() error { _, err := fw.control(off); return err }, nil
	case FaultKillPlugin:
		return nil, in.killPlugin(f.Target)
	case FaultKillEtcd, FaultQuorumLoss:
		return in.etcd.fault(ctx, f.Kind)
	}
	return nil, fmt.Errorf("unknown fault kind %q", f.Kind)
}

// linkFault partitions, resets or slows one process's broker link.
func linkFault(p *netproxy.Proxy, f FaultPlan) (func() error, error) {
	if p == nil {
		return nil, fmt.Errorf("no link %q", f.Target)
	}
	switch f.Kind {
	case FaultPartition:
		p.Partition(netproxy.Blackhole)
	case FaultReset:
		p.Partition(netproxy.Reset)
	case FaultDelay:
		p.SetDelay(f.Delay, f.Delay/4)
		return func() error { p.SetDelay(0, 0); return nil }, nil
	}
	return func() error { p.Heal(); return nil }, nil
}

// errNothingToFault: the fault's target was not there to hit (a plugin
// between a crash and its restart); the fault is skipped.
var errNothingToFault = errors.New("chaos: nothing to fault")

// killPlugin SIGKILLs the plugin process of device, named by its pid
// file, but only if that pid is a child of the device's agent: after a
// crash the file names a dead plugin until the agent starts a new one, and
// the number may belong to another process by then.
func (in *install) killPlugin(device string) error {
	b, err := os.ReadFile(in.path(device + ".pid"))
	if err != nil {
		return errNothingToFault
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("pid file of %s: %w", device, err)
	}
	agent := in.agents[in.plan.agentOf(device)]
	if agent.pid() == 0 || parentOf(pid) != agent.pid() {
		return errNothingToFault
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return errNothingToFault
	}
	return nil
}

// parentOf is pid's parent process id from /proc, 0 if unknown.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')') // the command name may hold spaces
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:])) // state, ppid, …
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// procNamed returns the broker, controller or agent called name.
func (in *install) procNamed(name string) *proc {
	if name == "broker" {
		return in.broker
	}
	for _, a := range append(in.controllers, in.agents...) {
		if a.name == name {
			return a
		}
	}
	return nil
}

// sleepUntil waits until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(t)):
		return true
	}
}

func sleepFor(ctx context.Context, d time.Duration) { sleepUntil(ctx, time.Now().Add(d)) }
