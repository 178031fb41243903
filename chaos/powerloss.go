package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/lossyfs"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
)

// PowerLossOptions are the command line of fencechaos --power-loss.
type PowerLossOptions struct {
	Cuts int    // power cuts to run, at least 1
	Seed uint64 // draws the devices, the load and every cut (moment, tearing); 0 draws one
	Out  string // the run's files go to a new directory under Out, kept on a violation or a harness error
	Self string // the fencechaos binary, which runs the broker, the controller and the agent
}

// plCutMax bounds how long the load runs between the checks after a
// restart and the next cut (drawn uniformly from 0 to it).
const plCutMax = 1500 * time.Millisecond

// plPrintMax bounds the violations printed for one cut.
const plPrintMax = 12

// PowerLossSummary totals a power-loss campaign.
type PowerLossSummary struct {
	Seed        uint64
	Dir         string // the run's files
	Cuts, Torn  int
	Dropped     int                   // unsynced writes the cuts dropped (or tore)
	Acked       int                   // answers the supervisors got, busy aside
	Codes       map[protocol.Code]int // the answers by code
	InDoubt     int                   // in_doubt answers to the supervisors
	Unanswered  int                   // commands the supervisors gave up on without an answer
	Resent      int                   // re-sent commands judged (rule 1)
	ResentDoubt int                   // … answered in_doubt
	Weakened    int                   // … answered in_doubt though their earlier answer was a result
	ResentLost  int                   // re-sends that got no answer to judge
	Probes      int                   // stale-token probes sent after restarts (rule 2)
	ProbesStale int                   // … answered stale_token
	Applies     int                   // distinct applies seen in the devices' logs (rule 3)
	TornLines   int                   // apply-log lines that start with a torn write
	Violations  map[string]int        // by rule (RuleResend, RuleFence, RuleApplyLog, RuleRestart)
	Took        time.Duration
}

// Total is the number of violations.
func (s PowerLossSummary) Total() int {
	n := 0
	for _, v := range s.Violations {
		n += v
	}
	return n
}

// RunPowerLoss runs a power-loss campaign of the whole agent: broker and
// controller on the normal disk, one agent whose data directory and whose
// sim devices' apply logs and fence files live on a lossyfs mount, and
// supervisors in this process driving load at it. Each round lets the load
// run for a drawn while, cuts the power (half the cuts torn; the cut kills
// the agent), restarts the agent on what the cut left and checks, against
// the answers the supervisors got before the cut: (1) each answered
// command sent again with the same id, token and args gets the same answer
// (marked duplicate) or in_doubt, never a fresh apply, and a command
// answered expired is not found journaled as accepted; (2) no command with
// a token below the highest acknowledged one of its domain is accepted —
// every restart probes each domain with an older token, which must be
// answered stale_token; (3) no device's apply log holds one command id
// applied twice. It prints a line per cut, the summary, the seed and a
// replay command on a violation, and last "N cuts, V violations"; it
// returns ExitOK, ExitViolation or ExitHarness.
//
// The process running it serves the FUSE mount, so it must run as root
// with /dev/fuse (lossyfs.Available), and it never maps a file of the
// mount: the stores run in the agent's process, the checks read copies.
func RunPowerLoss(ctx context.Context, o PowerLossOptions, w io.Writer) int {
	sum, err := runPowerLoss(ctx, o, w)
	switch {
	case sum.Total() > 0:
		return ExitViolation
	case err != nil || sum.Cuts < o.Cuts:
		return ExitHarness
	}
	return ExitOK
}

// ReplayPowerLoss is the command line that runs a campaign again.
func ReplayPowerLoss(o PowerLossOptions, seed uint64) string {
	return fmt.Sprintf("fencechaos --power-loss --cuts %d --seed %d --out %s", o.Cuts, seed, o.Out)
}

// runPowerLoss is RunPowerLoss returning the summary and the harness error
// that ended the campaign early, if any.
func runPowerLoss(ctx context.Context, o PowerLossOptions, w io.Writer) (PowerLossSummary, error) {
	sum := PowerLossSummary{Seed: o.Seed, Codes: map[protocol.Code]int{}, Violations: map[string]int{}}
	if sum.Seed == 0 {
		sum.Seed = rand.Uint64() >> 1
	}
	fmt.Fprintf(w, "fencechaos --power-loss: %d cuts, seed %d, out %s\n", o.Cuts, sum.Seed, o.Out)
	if o.Cuts < 1 {
		err := fmt.Errorf("%d cuts: want at least 1", o.Cuts)
		fmt.Fprintf(w, "HARNESS ERROR: %v\n0 cuts, 0 violations\n", err)
		return sum, err
	}
	if err := lossyfs.Available(); err != nil {
		fmt.Fprintf(w, "HARNESS ERROR: %v (the power-loss mode serves a FUSE mount: run as root with /dev/fuse)\n", err)
		fmt.Fprintf(w, "0 cuts, 0 violations\n")
		return sum, err
	}
	start := time.Now()
	pr, err := setupPowerLoss(ctx, o, sum.Seed, w)
	if pr != nil {
		sum.Dir = pr.dir
		if err == nil {
			err = pr.loop(ctx, &sum)
		}
		err = errors.Join(err, pr.teardown(&sum))
		pr.led.tally(&sum)
		sum.Applies, sum.TornLines = pr.logs.entries(), len(pr.logs.torn)
	}
	sum.Took = time.Since(start)
	if err != nil {
		fmt.Fprintf(w, "HARNESS ERROR: %v\n", err)
	}
	fmt.Fprint(w, sum.Table())
	if sum.Total() > 0 || err != nil { // the files are kept for a look
		fmt.Fprintf(w, "seed %d; files: %s\nreplay: %s\n", sum.Seed, sum.Dir, ReplayPowerLoss(o, sum.Seed))
	} else if sum.Dir != "" {
		_ = os.RemoveAll(sum.Dir)
	}
	fmt.Fprintf(w, "%d cuts, %d violations\n", sum.Cuts, sum.Total())
	return sum, err
}

// plRun is one running campaign.
type plRun struct {
	o       PowerLossOptions
	w       io.Writer
	dir     string
	r       *rand.Rand // the campaign's draws: cut moments, tearing, probes; the main goroutine's only
	plan    Plan
	m       *lossyfs.Mount
	in      *install
	agent   *proc
	status  *agentWatch
	led     *ledger
	logs    *applyLogs
	history *os.File
	checker *supervisor.Client
	sups    []*plSup
	stop    context.CancelFunc // ends the load
	load    sync.WaitGroup
}

// setupPowerLoss makes the run's directory, mounts the lossy file system,
// starts broker, controller and agent and, once it is online, the load. A
// non-nil plRun must be torn down, also with an error.
func setupPowerLoss(ctx context.Context, o PowerLossOptions, seed uint64, w io.Writer) (*plRun, error) {
	dir, err := newRunDir(o.Out, seed)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, seed^0x5bd1e9955bd1e995))
	plan, failing := powerLossPlan(seed, r)
	pr := &plRun{o: o, w: w, dir: dir, r: r, plan: plan,
		in: &install{plan: plan, dir: dir, self: o.Self}, logs: newApplyLogs(plan.devices(), filepath.Join(dir, "copies"))}
	if pr.history, err = os.Create(filepath.Join(dir, "powerloss.history")); err != nil {
		return nil, err
	}
	pr.led = newLedger(pr.history)
	for _, sub := range []string{"mnt", "copies"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return pr, err
		}
	}
	if err := writeJSON(filepath.Join(dir, "plan.json"), plan); err != nil {
		return pr, err
	}
	if pr.m, err = lossyfs.New().Mount(filepath.Join(dir, "mnt")); err != nil {
		return pr, err
	}
	if err := pr.in.start(ctx); err != nil { // broker and controller: the plan has no agent of its own
		return pr, err
	}
	cfg, err := writeAgentConfig(pr.in, pr.m.Dir(), failing, 7+r.IntN(8))
	if err != nil {
		return pr, err
	}
	pr.agent = pr.in.role(plAgent, "agent", cfg)
	if pr.status, err = watchAgent(ctx, pr.in.brokerAddr, plAgent); err != nil {
		return pr, err
	}
	if _, err := pr.startAgent(ctx); err != nil {
		return pr, err
	}
	if err := awaitDevicesOnline(ctx, pr.in); err != nil {
		return pr, err
	}
	return pr, pr.startLoad(ctx, 2+r.IntN(2))
}

// newRunDir makes a new directory for the run under out: powerloss-SEED,
// or with a suffix if a run of the seed left its files there.
func newRunDir(out string, seed uint64) (string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	for i := 0; ; i++ {
		dir := filepath.Join(out, fmt.Sprintf("powerloss-%d", seed))
		if i > 0 {
			dir += fmt.Sprintf(".%d", i)
		}
		err := os.Mkdir(dir, 0o755)
		if err == nil || !errors.Is(err, os.ErrExist) {
			return dir, err
		}
	}
}

// startAgent starts the agent, registers it with the mount (the next cut
// kills it) and waits until it is online. It returns how long that took.
// An agent that exits instead breaks the restart rule.
func (pr *plRun) startAgent(ctx context.Context) (time.Duration, error) {
	since := time.Now()
	if err := pr.agent.start(ctx); err != nil {
		return 0, err
	}
	pr.m.Register(pr.agent.osProcess())
	err := pr.status.waitBoot(ctx, since, pr.agent.done())
	if errors.Is(err, errAgentExited) {
		pr.led.violate(RuleRestart, fmt.Sprintf("the agent did not come back on what the cut left: %v; its log ends:\n%s",
			err, indent(pr.agent.logTail(8))))
	}
	return time.Since(since), err
}

// startLoad dials the checker and n supervisors and starts their load.
func (pr *plRun) startLoad(ctx context.Context, n int) error {
	broker := "tcp://" + pr.in.brokerAddr
	var err error
	if pr.checker, err = dialSupervisor(ctx, broker, "checker"); err != nil {
		return err
	}
	lctx, stop := context.WithCancel(ctx)
	pr.stop = stop
	for i := range n {
		name := fmt.Sprintf("sup%d", i+1)
		c, err := dialSupervisor(ctx, broker, name)
		if err != nil {
			return err
		}
		s := &plSup{name: name, c: c, r: rand.New(rand.NewPCG(pr.plan.Seed, uint64(i+1))), domains: pr.plan.Domains, led: pr.led}
		pr.sups = append(pr.sups, s)
		pr.load.Go(func() { s.run(lctx) })
	}
	return nil
}

// loop runs the cuts, printing a line for each; it stops early at a
// harness error, when ctx ends, or when the agent does not come back.
func (pr *plRun) loop(ctx context.Context, sum *PowerLossSummary) error {
	for k := 1; k <= pr.o.Cuts; k++ {
		from := len(pr.led.violationsFrom(0))
		res, err := pr.round(ctx, k)
		if res.cut {
			sum.add(res)
		}
		vs := pr.led.violationsFrom(from)
		pr.report(k, res, vs)
		if err != nil {
			return err
		}
		if len(vs) > 0 {
			if serr := os.Rename(filepath.Join(pr.dir, "cut-state"), filepath.Join(pr.dir, fmt.Sprintf("cut%d-state", k))); serr != nil {
				fmt.Fprintf(pr.w, "  (could not keep the state the cut left: %v)\n", serr)
			}
		}
		if res.agentGone || ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// roundResult is what one cut did and found.
type roundResult struct {
	cut       bool // the power was cut
	after     time.Duration
	torn      bool
	dropped   lossyfs.CutReport
	back      time.Duration // from the restart until the agent was online
	answers   int           // answers in the run the cut ended
	resend    resendStats
	probes    int
	stale     int // probes answered stale_token
	agentGone bool
}

// round lets the load run, cuts the power, checks the apply logs as the cut
// left them, restarts the agent and checks the answers (rules 1 and 2).
func (pr *plRun) round(ctx context.Context, k int) (roundResult, error) {
	res := roundResult{after: time.Duration(pr.r.Int64N(int64(plCutMax) + 1))}
	sleep(ctx, res.after)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if err := pr.logs.scan(pr.m, fmt.Sprintf("before cut %d", k), pr.led); err != nil {
		return res, err
	}
	res.torn = pr.r.IntN(2) == 0
	opts := lossyfs.CutOptions{Torn: res.torn, Capture: pr.logNames()}
	if res.torn {
		opts.Rand = rand.New(rand.NewPCG(pr.r.Uint64(), pr.r.Uint64()))
	}
	cutAt := time.Now()
	rep, err := pr.m.Cut(opts)
	if err != nil {
		return res, fmt.Errorf("cut %d: %w", k, err)
	}
	res.cut, res.dropped = true, rep
	pr.logs.scanCaptured(rep.Captured, fmt.Sprintf("at cut %d", k), pr.led)
	pr.agent.wait(10 * time.Second)
	res.answers = pr.led.answersIn(k)
	pr.led.nextRound()
	if err := pr.afterCut(k); err != nil {
		return res, err
	}
	if res.back, err = pr.startAgent(ctx); err != nil {
		res.agentGone = errors.Is(err, errAgentExited)
		if res.agentGone {
			return res, nil
		}
		return res, fmt.Errorf("restart after cut %d: %w", k, err)
	}
	res.resend = resend(ctx, pr.checker, pr.led, pr.led.due(cutAt, resendSample, pr.r))
	res.probes, res.stale = pr.probe(ctx, k)
	return res, nil
}

// logNames returns the names of the devices' apply logs on the mount.
func (pr *plRun) logNames() []string {
	var names []string
	for _, dev := range pr.logs.devices {
		names = append(names, logName(dev))
	}
	return names
}

// afterCut keeps the state the cut left (for a look after a violation) and
// checks the apply logs in it.
func (pr *plRun) afterCut(k int) error {
	state := filepath.Join(pr.dir, "cut-state")
	_ = os.RemoveAll(state)
	if err := snapshot(pr.m, state); err != nil {
		return fmt.Errorf("keep the state cut %d left: %w", k, err)
	}
	return pr.logs.scan(pr.m, fmt.Sprintf("after cut %d", k), pr.led)
}

// probe sends, to every device of each domain, a fresh command under the
// highest lease token below the domain's highest acknowledged one, through
// the supervisor that held it: it must be answered stale_token (rule 2;
// the ledger judges the answer). Every device, since each one's worker
// checks the fence on its own.
func (pr *plRun) probe(ctx context.Context, k int) (sent, stale int) {
	for _, d := range pr.plan.Domains {
		h, ok := pr.led.highest(d.Name)
		if !ok {
			continue
		}
		t, ok := pr.led.below(d.Name, h.pos)
		if !ok {
			continue
		}
		s := pr.sup(t.sup)
		if s == nil {
			continue
		}
		for _, dev := range d.Devices {
			sent++
			if s.probe(ctx, d.Name, dev.ID, t, k, pr.r) == protocol.CodeStaleToken {
				stale++
			}
		}
	}
	return sent, stale
}

func (pr *plRun) sup(name string) *plSup {
	for _, s := range pr.sups {
		if s.name == name {
			return s
		}
	}
	return nil
}

// teardown stops the load, stops the agent (SIGTERM: it drains), checks the
// apply logs one last time, unmounts and stops the installation.
func (pr *plRun) teardown(sum *PowerLossSummary) error {
	var errs []error
	if pr.stop != nil {
		pr.stop()
	}
	pr.load.Wait()
	for _, s := range pr.sups {
		s.c.Close()
	}
	if pr.checker != nil {
		pr.checker.Close()
	}
	if pr.agent != nil {
		pr.agent.stop(10 * time.Second)
	}
	if pr.m != nil {
		if sum.Cuts > 0 {
			errs = append(errs, pr.logs.scan(pr.m, "at the end", pr.led))
		}
		if err := pr.m.Unmount(); err != nil && !errors.Is(err, lossyfs.ErrUnmounted) {
			errs = append(errs, err)
		}
	}
	if pr.status != nil {
		pr.status.close()
	}
	if pr.in != nil {
		pr.in.stopAll()
	}
	if pr.history != nil {
		errs = append(errs, pr.history.Close())
	}
	return errors.Join(errs...)
}

// add counts one cut.
func (s *PowerLossSummary) add(r roundResult) {
	s.Cuts++
	if r.torn {
		s.Torn++
	}
	s.Dropped += r.dropped.Writes
	s.Resent += r.resend.sent
	s.ResentDoubt += r.resend.inDoubt
	s.Weakened += r.resend.weakened
	s.ResentLost += r.resend.unanswered
	s.Probes += r.probes
	s.ProbesStale += r.stale
}

// report prints cut k's line and its violations.
func (pr *plRun) report(k int, r roundResult, vs []plViolation) {
	if !r.cut {
		return
	}
	kind := "clean"
	if r.torn {
		kind = "torn"
	}
	line := fmt.Sprintf("[%d/%d] %s cut after %v of load: %d unsynced writes in %d files, %d directories reverted; %d answers before it",
		k, pr.o.Cuts, kind, r.after.Round(time.Millisecond), r.dropped.Writes, r.dropped.Files, r.dropped.Entries, r.answers)
	if !r.agentGone && r.back > 0 {
		line += fmt.Sprintf("; agent back in %v; %d re-sent (%d same, %d in_doubt, %d unanswered); %d/%d probes stale",
			r.back.Round(time.Millisecond), r.resend.sent, r.resend.same, r.resend.inDoubt, r.resend.unanswered, r.stale, r.probes)
	}
	if len(vs) == 0 {
		fmt.Fprintln(pr.w, line+": ok")
		return
	}
	fmt.Fprintf(pr.w, "%s: VIOLATION (%d)\n", line, len(vs))
	for i, v := range vs {
		if i == plPrintMax {
			fmt.Fprintf(pr.w, "  … and %d more (all in powerloss.history)\n", len(vs)-i)
			break
		}
		fmt.Fprintf(pr.w, "  %s\n", v)
	}
	fmt.Fprintf(pr.w, "  files: %s (powerloss.history, cut%d-state/, copies/, *.log)\n  replay: %s\n",
		pr.dir, k, ReplayPowerLoss(pr.o, pr.plan.Seed))
}

// Table renders the summary.
func (s PowerLossSummary) Table() string {
	var b strings.Builder
	row := func(name string, format string, args ...any) {
		fmt.Fprintf(&b, "%-32s %s\n", name, fmt.Sprintf(format, args...))
	}
	b.WriteString("\n")
	row("cuts", "%d (%d torn), %d unsynced writes dropped", s.Cuts, s.Torn, s.Dropped)
	if s.Took > 0 && s.Cuts > 0 {
		row("took", "%v (%.1f cuts a minute)", s.Took.Round(time.Second), float64(s.Cuts)/s.Took.Minutes())
	}
	row("commands acknowledged", "%d (%s); %d without an answer", s.Acked, codesText(s.Codes), s.Unanswered)
	row("in_doubt answers", "%d to the supervisors, %d to re-sends (%d of them results before)", s.InDoubt, s.ResentDoubt, s.Weakened)
	row("re-sent checks (rule 1)", "%d judged, %d unanswered", s.Resent, s.ResentLost)
	row("stale-token probes (rule 2)", "%d, %d answered stale_token", s.Probes, s.ProbesStale)
	row("applies in the logs (rule 3)", "%d distinct, %d torn lines", s.Applies, s.TornLines)
	for _, rule := range []string{RuleResend, RuleFence, RuleApplyLog, RuleRestart} {
		row("violations "+rule, "%d", s.Violations[rule])
	}
	return b.String()
}

func codesText(codes map[protocol.Code]int) string {
	var parts []string
	for c, n := range codes {
		parts = append(parts, fmt.Sprintf("%s %d", c, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }
