// Command fencechaos runs a whole fencegate installation — controller,
// agents, broker, supervisors and devices, each a real child process —
// through randomized fault schedules and checks the invariants from the
// outside. See docs/reliability.md.
//
//	fencechaos [--schedules N] [--duration D] [--seed S] [--out DIR] [--parallel P]
//	           [--broker embedded|mosquitto] [--store bbolt|etcd] [--keep]
//	fencechaos --power-loss [--cuts N] [--seed S] [--out DIR]
//	fencechaos --recheck DIR...
//
// --power-loss runs power-cut campaigns instead: one agent whose data,
// apply logs and fence files live on a file system that forgets unsynced
// writes (internal/lossyfs; needs root and /dev/fuse); the last line is
// "N cuts, V violations". --recheck judges kept schedule directories
// (schedule-SEED/) again with this build's checker.
//
// Exit status: 0 when no invariant was violated, 1 on a violation, 2 on a
// harness error. The last line of output is "N schedules, V violations".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/chaos"
	"github.com/fencegate/fencegate/internal/buildinfo"
)

func main() {
	chaos.MaybeRunRole() // a child process of a schedule runs its role and exits
	cmd, err := parseArgs(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencechaos:", err)
		os.Exit(chaos.ExitHarness)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var code int
	switch {
	case cmd.version:
		buildinfo.Fprint(os.Stdout, "fencechaos")
	case cmd.recheck != nil:
		code = chaos.Recheck(cmd.recheck, os.Stdout)
	case cmd.powerLoss != nil:
		code = chaos.RunPowerLoss(ctx, *cmd.powerLoss, os.Stdout)
	default:
		code = chaos.Run(ctx, cmd.Options, os.Stdout)
	}
	stop()
	os.Exit(code)
}

// command is a parsed command line: a campaign of schedules, or of power
// cuts when powerLoss is set.
type command struct {
	chaos.Options
	powerLoss *chaos.PowerLossOptions
	recheck   []string // schedule directories to judge again
	version   bool     // print the version and exit
}

// parseArgs parses the command line.
func parseArgs(args []string, stderr io.Writer) (command, error) {
	fs := flag.NewFlagSet("fencechaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := buildinfo.Flag(fs)
	var cmd command
	o := &cmd.Options
	fs.IntVar(&o.Schedules, "schedules", 10, "number of schedules to run")
	fs.DurationVar(&o.Duration, "duration", 20*time.Second, "how long each schedule's workload and faults run")
	seed := fs.Uint64("seed", 0, "seed of the first schedule (schedule i runs seed+i); 0 draws one")
	fs.StringVar(&o.Out, "out", "fencechaos-out", "directory for the schedules' files (kept on a violation)")
	fs.IntVar(&o.Parallel, "parallel", 1, "schedules run at once")
	fs.StringVar(&o.Broker, "broker", "embedded", "broker: embedded (fencegate's, in its own process) or mosquitto")
	fs.StringVar(&o.Store, "store", "bbolt", "controller store: bbolt or etcd")
	fs.StringVar(&o.Etcd, "etcd", "etcd", "the etcd binary, with --store etcd (Debian: apt-get install etcd-server)")
	fs.BoolVar(&o.Keep, "keep", false, "keep every schedule's files, not only failing ones")
	powerLoss := fs.Bool("power-loss", false, "power-cut campaign of one agent on a lossy file system instead (root, /dev/fuse; docs/reliability.md)")
	cuts := fs.Int("cuts", 100, "with --power-loss: power cuts to run")
	recheck := fs.Bool("recheck", false, "judge again, with this build's checker, the kept schedule directories given as arguments")
	if err := fs.Parse(args); err != nil {
		return cmd, err
	}
	if *version {
		return command{version: true}, nil
	}
	if *recheck {
		if fs.NArg() == 0 {
			return cmd, fmt.Errorf("--recheck: name at least one schedule directory")
		}
		return command{recheck: fs.Args()}, nil
	}
	if fs.NArg() > 0 {
		return cmd, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *powerLoss {
		return powerLossCommand(fs, *seed, *cuts, o.Out)
	}
	switch {
	case o.Schedules < 1:
		return cmd, fmt.Errorf("--schedules %d: want at least 1", o.Schedules)
	case o.Duration < 2*time.Second:
		return cmd, fmt.Errorf("--duration %v: want at least 2s", o.Duration)
	case o.Parallel < 1:
		return cmd, fmt.Errorf("--parallel %d: want at least 1", o.Parallel)
	case o.Broker != "embedded" && o.Broker != "mosquitto":
		return cmd, fmt.Errorf("--broker %q: want embedded or mosquitto", o.Broker)
	case o.Store != "bbolt" && o.Store != "etcd":
		return cmd, fmt.Errorf("--store %q: want bbolt or etcd", o.Store)
	}
	o.Seed = *seed
	if o.Seed == 0 {
		o.Seed = rand.Uint64() >> 1
	}
	self, err := os.Executable()
	if err != nil {
		return cmd, err
	}
	o.Self = self
	if o.Out, err = filepath.Abs(o.Out); err != nil {
		return cmd, err
	}
	if o.Broker == "mosquitto" {
		if o.Mosquitto, err = exec.LookPath("mosquitto"); err != nil {
			if o.Mosquitto, err = exec.LookPath("/usr/sbin/mosquitto"); err != nil {
				return cmd, fmt.Errorf("--broker mosquitto: mosquitto is not installed (apt-get install mosquitto)")
			}
		}
	}
	if o.Store == "etcd" {
		if o.Etcd, err = exec.LookPath(o.Etcd); err != nil {
			return cmd, fmt.Errorf("--store etcd: %w (apt-get install etcd-server, or --etcd PATH)", err)
		}
	}
	return cmd, nil
}

// powerLossCommand checks a --power-loss command line: only --cuts, --seed
// and --out apply.
func powerLossCommand(fs *flag.FlagSet, seed uint64, cuts int, out string) (command, error) {
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "power-loss", "cuts", "seed", "out":
		default:
			err = fmt.Errorf("--%s does not apply with --power-loss (only --cuts, --seed, --out)", f.Name)
		}
	})
	if err != nil {
		return command{}, err
	}
	if cuts < 1 {
		return command{}, fmt.Errorf("--cuts %d: want at least 1", cuts)
	}
	self, err := os.Executable()
	if err != nil {
		return command{}, err
	}
	if out, err = filepath.Abs(out); err != nil {
		return command{}, err
	}
	return command{powerLoss: &chaos.PowerLossOptions{Cuts: cuts, Seed: seed, Out: out, Self: self}}, nil
}
