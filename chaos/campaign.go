package chaos

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fencegate/fencegate/chaos/check"
)

// Options are fencechaos's command line.
type Options struct {
	Schedules int
	Duration  time.Duration
	Seed      uint64 // schedule i runs seed Seed+i
	Out       string // schedules' files; kept for violations and harness errors
	Parallel  int
	Broker    string // "embedded" or "mosquitto"
	Store     string // "bbolt" or "etcd"
	Keep      bool   // keep every schedule's files, not only failing ones
	Self      string // the fencechaos binary, which runs every role
	Mosquitto string // the mosquitto binary, with Broker "mosquitto"
	Etcd      string // the etcd binary, with Store "etcd"
}

func (o Options) plan() PlanOptions {
	return PlanOptions{Duration: o.Duration, Broker: o.Broker, Store: o.Store}
}

// Exit codes of a campaign.
const (
	ExitOK        = 0 // no invariant was violated
	ExitViolation = 1 // at least one schedule violated an invariant
	ExitHarness   = 2 // the harness could not run or judge a schedule
)

// Summary totals a campaign.
type Summary struct {
	Schedules  int
	Violations int // schedules with a violation
	Errors     int // schedules the harness could not run or judge
	Exits      int // processes that exited on their own (restarted if supervised)
	Stats      check.Stats
	Progress   time.Duration // the longest heal-to-progress time
}

// Run runs the campaign, printing a line per schedule, the summary table
// and, last, "N schedules, V violations". It returns the exit code.
func Run(ctx context.Context, o Options, w io.Writer) int {
	fmt.Fprintf(w, "fencechaos: %d schedules of %v, seed %d, broker %s, store %s, parallel %d, out %s\n",
		o.Schedules, o.Duration, o.Seed, o.Broker, o.Store, o.Parallel, o.Out)
	var (
		mu  sync.Mutex
		sum = Summary{Stats: check.Stats{}}
		wg  sync.WaitGroup
	)
	seeds := make(chan uint64)
	for range max(o.Parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				out := runSchedule(ctx, o, seed, scheduleDir(o.Out, seed))
				mu.Lock()
				sum.add(out)
				report(w, o, out, sum.Schedules)
				mu.Unlock()
				if !o.Keep && !out.Violated() && out.Err == nil {
					os.RemoveAll(out.Dir)
				}
			}
		}()
	}
	for i := range o.Schedules {
		if ctx.Err() != nil {
			break
		}
		seeds <- o.Seed + uint64(i)
	}
	close(seeds)
	wg.Wait()
	fmt.Fprint(w, sum.Table(o))
	fmt.Fprintf(w, "%d schedules, %d violations\n", sum.Schedules, sum.Violations)
	switch {
	case sum.Violations > 0:
		return ExitViolation
	case sum.Errors > 0 || sum.Schedules < o.Schedules:
		return ExitHarness
	}
	return ExitOK
}

func (s *Summary) add(out Outcome) {
	s.Schedules++
	s.Exits += len(out.Exits)
	switch {
	case out.Err != nil:
		s.Errors++
		return
	case out.Violated():
		s.Violations++
	}
	s.Stats.Add(out.Report.Stats)
	s.Progress = max(s.Progress, out.Report.Progress)
}

// report prints one schedule's line; for a violation or an error, what to
// look at and the command that replays the seed.
func report(w io.Writer, o Options, out Outcome, n int) {
	st := out.Report.Stats
	switch {
	case out.Err != nil:
		fmt.Fprintf(w, "[%d/%d] seed %d: HARNESS ERROR: %v\n  files: %s\n  replay: %s\n", n, o.Schedules, out.Seed, out.Err, out.Dir, Replay(o, out.Seed))
	case out.Violated():
		fmt.Fprintf(w, "[%d/%d] seed %d: VIOLATION (%d)\n", n, o.Schedules, out.Seed, len(out.Report.Violations))
		for _, v := range out.Report.Violations {
			fmt.Fprintf(w, "  %s\n", v)
		}
		fmt.Fprintf(w, "  files: %s (plan.json, *.history, *.applies, *.log)\n  replay: %s\n", out.Dir, Replay(o, out.Seed))
	default:
		fmt.Fprintf(w, "[%d/%d] seed %d: ok — %d commands, %d applies, %d faults, progress %v\n",
			n, o.Schedules, out.Seed, st.Commands, st.Applies, totalFaults(st), out.Report.Progress.Round(time.Millisecond))
	}
	for _, e := range out.Exits {
		fmt.Fprintf(w, "  exit: %s\n", e)
	}
	for _, note := range out.Report.Notes {
		fmt.Fprintf(w, "  note: %s\n", note)
	}
}

// Replay is the command line that runs the schedule of seed again.
func Replay(o Options, seed uint64) string {
	args := []string{"fencechaos", "--schedules", "1", "--seed", fmt.Sprint(seed), "--duration", o.Duration.String(),
		"--broker", o.Broker, "--store", o.Store, "--out", o.Out}
	return strings.Join(args, " ")
}

// Table renders the campaign's summary table.
func (s Summary) Table(o Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-28s %d\n", "schedules run", s.Schedules)
	fmt.Fprintf(&b, "%-28s %d\n", "harness errors", s.Errors)
	fmt.Fprintf(&b, "%-28s %d\n", "unexpected process exits", s.Exits)
	fmt.Fprintf(&b, "%-28s %v\n", "longest heal → progress", s.Progress.Round(time.Millisecond))
	b.WriteString(s.Stats.Table())
	return b.String()
}

func totalFaults(s check.Stats) int {
	n := 0
	for _, c := range s.Faults {
		n += c
	}
	return n
}
