// Command fencebench measures fencegate and prints every figure of the
// performance goals, each with the baseline measured in the same run, the
// ratio, the goal and whether it is met.
//
// The default suite runs, on an embedded broker in this process: the agent
// end to end (sim devices, no latency) at 1, 100, 1,000 and 10,000 devices
// with a steady and with an advancing token, beside the bare MQTT
// request/reply round trip at the same concurrency; the lone command's p50
// against the round trip plus two bbolt commits; and, in child processes,
// the RSS of an idle agent at 1 and 10,000 devices. Each figure is the
// median of -runs measurements.
//
// -suite soak runs an agent under steady load (one process: embedded
// broker, agent, load) for -soak-for, prints its RSS every -soak-every (the
// curve), and then the RSS at the end against the RSS once warmed up. The
// journal keeps -soak-journal records per device, so that the store
// reaches its steady size within the soak: RSS counts the pages of
// fence.db that bbolt's mmap has touched, and the file grows until the
// journal is full.
//
// The goal suite also measures the lease controller on bbolt: grants at 1
// and 100 domains against the raw fdatasync loop of the same disk
// (fencebench-etcd, in the etcd test module, does the same on etcd against
// etcd's concurrency.Mutex). -suite grants prints those lines alone, and
// -suite agent the agent's lines alone (no grants, no RSS children): the
// quick loop for one change, and a CPU profile without the controller's
// work (it still holds the broker, the load clients and the bare-MQTT
// baseline runs beside the agent's).
//
// -suite persist prints the older table of persist's group commit: for each
// device count, for -duration each and in the same scratch directory, the
// raw write+fdatasync loop (the disk's baseline), the durable Accept
// workload and one plain bbolt Update per operation.
//
// Speed is measured, not asserted: the figures are only comparable with
// the baselines of the same run.
//
// Usage:
//
//	go run ./cmd/fencebench [-quick] [-json] [-runs 3] [-dir DIR] [-agent-devices 1,100,1000,10000]
//	go run ./cmd/fencebench -suite soak [-soak-for 10m] [-soak-every 30s] [-soak-devices 100] [-soak-journal 1000] [-json]
//	go run ./cmd/fencebench -suite grants [-quick] [-json] [-runs 3] [-dir DIR]
//	go run ./cmd/fencebench -suite agent [-quick] [-agent-devices 100] [-cpuprofile FILE]
//	go run ./cmd/fencebench -suite persist [-dir DIR] [-duration 2s] [-devices 1,10,100]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/internal/benchline"
	"github.com/fencegate/fencegate/internal/benchload"
	"github.com/fencegate/fencegate/internal/buildinfo"
)

// config is fencebench's flags.
type config struct {
	dir      string        // parent of the scratch directory; "" is os.TempDir()
	duration time.Duration // length of each measurement
	devices  []int         // concurrent device counts, one table row each
}

func main() {
	cfg := config{devices: []int{1, 10, 100}}
	goals := goalsConfig{devices: []int{1, 100, 1000, 10000}}
	var suiteName string
	var asJSON, asMarkdown bool
	var rssN int
	var soakChildMode bool
	soak := soakConfig{length: 10 * time.Minute, every: 30 * time.Second, devices: 100, journal: 1000}
	var profiles profiling
	flag.StringVar(&suiteName, "suite", "goals", "goals (every goal figure), grants (the controller's lines only), agent (the agent's lines only), soak (RSS curve under steady load) or persist (group-commit table)")
	flag.BoolVar(&goals.quick, "quick", false, "goals: fewer commands per measurement (the whole suite in about 2 minutes)")
	flag.BoolVar(&asJSON, "json", false, "goals: one JSON object per line (name, value, unit, baseline, ratio, goal, met)")
	flag.BoolVar(&asMarkdown, "markdown", false, "goals: Markdown table rows (for docs/benchmarks.md)")
	flag.IntVar(&goals.runs, "runs", 3, "goals: measurements per figure; the median is printed")
	flag.Func("agent-devices", "goals: comma-separated agent device counts (default 1,100,1000,10000)", func(s string) (err error) {
		goals.devices, err = parseDevices(s)
		return err
	})
	flag.DurationVar(&soak.length, "soak-for", soak.length, "soak: how long the steady load runs")
	flag.DurationVar(&soak.every, "soak-every", soak.every, "soak: RSS sampling interval")
	flag.IntVar(&soak.devices, "soak-devices", soak.devices, "soak: devices of the agent")
	flag.IntVar(&soak.journal, "soak-journal", soak.journal, "soak: journal records kept per device (the agent's journal.max_records; 0: its default, 10000, which 100 devices take about 15 min to fill here)")
	flag.BoolVar(&soakChildMode, "soak-child", false, "internal: run the soak's agent and load in this process and print its RSS samples")
	flag.IntVar(&rssN, "rss-child", 0, "internal: run an idle agent with this many devices and print its RSS")
	flag.StringVar(&profiles.cpu, "cpuprofile", "", "write a CPU profile of the run to this file")
	flag.StringVar(&profiles.heap, "memprofile", "", "write a heap profile at the end of the run (with -rss-child: of the idle agent) to this file")
	flag.StringVar(&cfg.dir, "dir", "", "directory on the disk to measure; a scratch directory is made in it and removed at exit (default os.TempDir())")
	flag.DurationVar(&cfg.duration, "duration", 2*time.Second, "persist: length of each measurement")
	flag.Func("devices", "persist: comma-separated concurrent device counts (default 1,10,100)", func(s string) (err error) {
		cfg.devices, err = parseDevices(s)
		return err
	})
	version := buildinfo.Flag(flag.CommandLine)
	flag.Parse()
	if *version {
		buildinfo.Fprint(os.Stdout, "fencebench")
		return
	}
	goals.dir, goals.out = cfg.dir, &benchline.Printer{Out: os.Stdout, JSON: asJSON, Markdown: asMarkdown && !asJSON}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	soak.dir, soak.out, soak.json = cfg.dir, goals.out, asJSON
	var err error
	switch {
	case rssN > 0:
		err = rssChild(cfg.dir, rssN, os.Stdout, profiles)
	case soakChildMode:
		err = soakChild(ctx, soak, os.Stdout)
	case suiteName == "soak":
		err = runSoak(ctx, soak)
	default:
		err = profiles.run(func() error { return dispatch(ctx, suiteName, cfg, goals) })
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencebench:", err)
		os.Exit(1)
	}
}

func dispatch(ctx context.Context, suiteName string, cfg config, goals goalsConfig) error {
	switch {
	case suiteName == "persist":
		return run(ctx, cfg, os.Stdout)
	case suiteName != "goals" && suiteName != "grants" && suiteName != "agent":
		return fmt.Errorf("-suite %q is not goals, grants, agent, soak or persist", suiteName)
	case goals.runs < 1:
		return fmt.Errorf("-runs %d is not positive", goals.runs)
	}
	goals.out.Header("fencebench: %s figures, median of %d, %s/%s, GOMAXPROCS=%d, %s, quick=%v",
		suiteName, goals.runs, runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.Version(), goals.quick)
	switch suiteName {
	case "grants":
		return runGrants(ctx, goals)
	case "agent":
		goals.agentOnly = true
	}
	return runGoals(ctx, goals)
}

func parseDevices(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("device count %q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// run measures every device count of cfg in a new scratch directory and
// prints a table row to out as each is done. Cancelling ctx stops the
// measurement in progress and is a clean exit: the rows done so far stay
// printed. The scratch directory is removed before run returns.
func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	if cfg.duration <= 0 {
		return fmt.Errorf("-duration %v is not positive", cfg.duration)
	}
	dir, err := os.MkdirTemp(cfg.dir, "fencebench-")
	if err != nil {
		return fmt.Errorf("scratch directory: %w", err)
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	tokens, err := benchload.NewTokens()
	if err != nil {
		return err
	}
	printHeader(out, dir, cfg.duration)
	for _, n := range cfg.devices {
		r, err := measure(ctx, dir, n, cfg.duration, tokens)
		if ctx.Err() != nil {
			fmt.Fprintln(out, "interrupted")
			return nil
		}
		if err != nil {
			return fmt.Errorf("devices=%d: %w", n, err)
		}
		r.print(out)
	}
	return nil
}

// row is one device count's measurements.
type row struct {
	devices            int
	raw                benchload.Result // write 4 KiB + fdatasync loop
	accept             benchload.Result // durable Store.Accept
	commits, committed int64            // persist commits and the ops they held
	raised             int64            // accepts that raised the fence
	updateEach         benchload.Result // one bbolt Update per op
}

// measure runs the three workloads for devices devices, d each, in dir.
func measure(ctx context.Context, dir string, devices int, d time.Duration, tokens *benchload.Tokens) (row, error) {
	r := row{devices: devices}
	var err error
	if r.raw, err = benchload.RawFsync(ctx, dir, d); err != nil {
		return r, err
	}
	if err := tokens.Grow(devices, tokensNeeded(r.raw.Rate(), d, devices)); err != nil {
		return r, err
	}
	if err := measureAccept(ctx, &r, filepath.Join(dir, "accept.db"), tokens, d); err != nil {
		return r, err
	}
	value := benchload.RecordValue(tokens.At(0, 0).Raw)
	r.updateEach, err = measureBolt(ctx, filepath.Join(dir, "update-each.db"), devices, d, value)
	return r, err
}

// maxTokens caps the pre-signed pool, over all devices (about a second of
// signing). Each device is its own domain; a device that uses up its share
// goes on with its last token (accepted, no raise: the table shows raises).
const maxTokens = 1 << 16

// tokensNeeded bounds the operations one device can do in d: each waits for
// at least one commit, and a commit for at least one fdatasync, so no device
// outruns the raw fsync rate; 1.5 is a margin for the noise between runs.
// The pool's cap is shared by the devices.
func tokensNeeded(rawRate float64, d time.Duration, devices int) int {
	return max(1, min(int(1.5*rawRate*d.Seconds())+1000, maxTokens/devices))
}

// measureAccept runs the durable Accept workload on a new store file at
// path, which it removes afterwards, and fills r's accept fields.
func measureAccept(ctx context.Context, r *row, path string, tokens *benchload.Tokens, d time.Duration) (err error) {
	load, err := benchload.OpenAcceptLoad(path, tokens, r.devices, false)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.Remove(path)) }()
	r.accept, err = benchload.Run(ctx, r.devices, benchload.Limit{Duration: d}, load.Op)
	r.commits, r.committed = load.Commits()
	r.raised = load.Raised()
	return errors.Join(err, load.Close())
}

// measureBolt runs the one-Update-per-operation baseline on a new bbolt
// file at path, which it removes afterwards.
func measureBolt(ctx context.Context, path string, devices int, d time.Duration, value []byte) (res benchload.Result, err error) {
	load, err := benchload.OpenBoltLoad(path, devices, false, value)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, os.Remove(path)) }()
	res, err = benchload.Run(ctx, devices, benchload.Limit{Duration: d}, load.Op)
	return res, errors.Join(err, load.Close())
}

// rowFormat lays out the table; printHeader and row.print share it.
const rowFormat = "%7v %10v %10v %10v %9v %9v %13v %11v %14v %14v\n"

func printHeader(out io.Writer, dir string, d time.Duration) {
	fmt.Fprintf(out, "fencebench: durable Store.Accept (group commit) against raw write+fdatasync and one bbolt Update per op\n")
	fmt.Fprintf(out, "dir %s, %v per measurement, %s/%s, GOMAXPROCS=%d, %s\n\n",
		dir, d, runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Fprintf(out, rowFormat, "devices", "accepts/s", "commits/s", "ops/commit", "p50", "p99",
		"raw fsyncs/s", "accepts/raw", "update-each/s", "×update-each")
}

func (r row) print(out io.Writer) {
	rate := r.accept.Rate()
	opsPerCommit := 0.0
	if r.commits > 0 {
		opsPerCommit = float64(r.committed) / float64(r.commits)
	}
	fmt.Fprintf(out, rowFormat, r.devices, num(rate), num(benchload.PerSecond(r.commits, r.accept.Elapsed)),
		fmt.Sprintf("%.1f", opsPerCommit), ms(r.accept.Percentile(0.5)), ms(r.accept.Percentile(0.99)),
		num(r.raw.Rate()), ratio(rate, r.raw.Rate()), num(r.updateEach.Rate()), ratio(rate, r.updateEach.Rate()))
	if r.raised < int64(r.accept.Ops) {
		fmt.Fprintf(out, "        (%d of %d accepts raised the fence: the pre-signed tokens ran out)\n",
			r.raised, r.accept.Ops)
	}
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond)) }

func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}
