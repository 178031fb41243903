package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fencegate/fencegate/chaos/check"
	"github.com/fencegate/fencegate/chaos/history"
	"github.com/fencegate/fencegate/devices/sim"
)

// ProgressBound is how long after the last fault healed the probe may take
// to acquire every domain and apply on every device.
const ProgressBound = 30 * time.Second

// DriverSlack is the checker's allowance between the agent handing a
// command to its driver and the device taking it (check.Input.DriverSlack):
// an in-process sim takes it at once, a plugin after a gRPC hop, and a
// goroutine may be descheduled between the agent's recheck and its call on
// a loaded machine. Stale-apply scenarios are TTLs (0.8–2 s) wide.
const DriverSlack = 20 * time.Millisecond

// Outcome is what one schedule came to.
type Outcome struct {
	Seed   uint64
	Dir    string       // the schedule's files (kept on a violation or a harness error)
	Report check.Report // the checker's verdict
	Err    error        // a harness error: the schedule could not be run or judged
	Exits  []string     // processes that exited without the harness causing it
}

// Violated reports whether the checker found a violation.
func (o Outcome) Violated() bool { return o.Err == nil && len(o.Report.Violations) > 0 }

// runSchedule runs the schedule of seed in dir and judges it.
func runSchedule(ctx context.Context, o Options, seed uint64, dir string) Outcome {
	out := Outcome{Seed: seed, Dir: dir}
	plan := NewPlan(seed, o.plan())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		out.Err = err
		return out
	}
	in := &install{plan: plan, dir: dir, self: o.Self, mosq: o.Mosquitto, etcdBin: o.Etcd}
	healed, err := play(ctx, in)
	out.Exits = in.unexpectedExits()
	if err == nil {
		out.Report, err = judge(in, healed)
	}
	out.Err = err
	return out
}

// play runs the installation through the plan: start, faults while the
// supervisors work, then the probe. It returns when the last fault healed.
func play(ctx context.Context, in *install) (healed int64, err error) {
	if err := writeJSON(in.path("plan.json"), in.plan); err != nil {
		return 0, err
	}
	defer in.stopAll()
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := in.start(sctx); err != nil {
		return 0, fmt.Errorf("start: %w", err)
	}
	if err := awaitDevicesOnline(sctx, in); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := in.startSupervisors(sctx, start.Add(in.plan.Duration)); err != nil {
		return 0, fmt.Errorf("start supervisors: %w", err)
	}
	faults, err := history.Create(in.path("faults.history"))
	if err != nil {
		return 0, err
	}
	defer faults.Close()
	j := &injector{in: in, rec: faults, active: map[string]bool{}}
	j.run(ctx, start, in.plan.Faults)
	if err := errors.Join(j.errs...); err != nil {
		return 0, err
	}
	for _, s := range in.sups { // they stop at the end of the duration by themselves
		s.wait(in.plan.Duration + 30*time.Second)
	}
	healed = max(j.healed, history.Now())
	if err := in.awaitReconnected(ctx); err != nil {
		return 0, err
	}
	rec, err := history.Create(in.path("probe.history"))
	if err != nil {
		return 0, err
	}
	defer rec.Close()
	if err := probe(ctx, in.plan, "tcp://"+in.brokerAddr, rec, ProgressBound); errors.Is(err, errProbeStuck) {
		in.dumpGoroutines() // the checker reports the progress violation; the logs say where they hang
	} else if err != nil {
		return 0, err
	}
	return healed, nil
}

// judge reads the histories and apply logs of in and checks them.
func judge(in *install, healed int64) (check.Report, error) {
	input := check.Input{Domains: map[string]string{}, Agents: map[string]string{}, Healed: healed,
		ProgressBound: ProgressBound, DoubtFaults: DoubtFaults, LineFaults: LineFaults, DriverSlack: DriverSlack}
	names := []string{"probe"}
	for _, s := range in.plan.Supervisors {
		names = append(names, s.Name)
	}
	for _, n := range names {
		ops, err := history.Read[history.Op](in.path(n + ".history"))
		if err != nil {
			return check.Report{}, err
		}
		input.Ops = append(input.Ops, ops...)
	}
	faults, err := history.Read[history.Fault](in.path("faults.history"))
	if err != nil {
		return check.Report{}, err
	}
	input.Faults = faults
	for _, d := range in.plan.Domains {
		for _, dev := range d.Devices {
			input.Domains[dev.ID] = d.Name
			input.Agents[dev.ID] = fmt.Sprintf("agent%d", d.Agent+1)
			entries, err := readApplies(in.path(dev.ID + ".applies"))
			if err != nil {
				return check.Report{}, err
			}
			input.Applies = append(input.Applies, entries...)
		}
	}
	r := check.Check(input)
	if r.Failed("I1") {
		if err := check.WriteLeaseVisualization(input, in.path("leases.html")); err != nil {
			r.Notes = append(r.Notes, "lease visualization: "+err.Error())
		}
	}
	return r, nil
}

// readApplies reads an apply log; a device that applied nothing has none.
func readApplies(path string) ([]sim.Entry, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return sim.ReadLog(path)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// scheduleDir is where the schedule of seed keeps its files under out.
func scheduleDir(out string, seed uint64) string {
	return filepath.Join(out, fmt.Sprintf("schedule-%d", seed))
}

// Recheck judges again the kept schedules in dirs (each a schedule-SEED
// directory of an earlier campaign) with this build's checker, printing a
// line per schedule and, last, "N schedules, V violations". It returns
// the exit code, as Run does.
func Recheck(dirs []string, w io.Writer) int {
	violations, errs := 0, 0
	for _, dir := range dirs {
		plan, err := readPlan(filepath.Join(dir, "plan.json"))
		if err != nil {
			fmt.Fprintf(w, "%s: HARNESS ERROR: %v\n", dir, err)
			errs++
			continue
		}
		healed := int64(0)
		if faults, err := history.Read[history.Fault](filepath.Join(dir, "faults.history")); err == nil {
			for _, f := range faults {
				healed = max(healed, f.End)
			}
		}
		if probe, err := history.Read[history.Op](filepath.Join(dir, "probe.history")); err == nil && len(probe) > 0 {
			healed = max(healed, probe[0].Start) // the probe starts once every fault healed
		}
		r, err := judge(&install{plan: plan, dir: dir}, healed)
		switch {
		case err != nil:
			fmt.Fprintf(w, "%s: HARNESS ERROR: %v\n", dir, err)
			errs++
		case len(r.Violations) > 0:
			violations++
			fmt.Fprintf(w, "%s: VIOLATION (%d)\n", dir, len(r.Violations))
			for _, v := range r.Violations {
				fmt.Fprintf(w, "  %s\n", v)
			}
		default:
			fmt.Fprintf(w, "%s: ok\n", dir)
		}
	}
	fmt.Fprintf(w, "%d schedules, %d violations\n", len(dirs), violations)
	switch {
	case violations > 0:
		return ExitViolation
	case errs > 0:
		return ExitHarness
	}
	return ExitOK
}
