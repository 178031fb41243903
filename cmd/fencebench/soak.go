package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/agent"
	"github.com/fencegate/fencegate/internal/benchagent"
	"github.com/fencegate/fencegate/internal/benchline"
	"github.com/fencegate/fencegate/internal/benchload"
)

// soakConfig is the soak suite's part of the flags: an agent under steady
// load for a long time, its RSS sampled at intervals.
type soakConfig struct {
	dir     string
	length  time.Duration // how long the load runs
	every   time.Duration // sampling interval
	devices int
	journal int // journal records kept per device (agent journal.max_records)
	out     *benchline.Printer
	json    bool
}

// soakGoal bounds the RSS at the end ÷ the RSS once warmed up: flat, with
// a tenth for the noise of the garbage collector's cycles.
const soakGoal = 1.10

// soakRunOps is the length of one load run of the soak, in commands (some
// 30 s here): each run takes one new token per device (the load's only
// growing state), so runs are long.
const soakRunOps = 100_000

// sample is one point of the soak's RSS curve.
type sample struct {
	Name     string  `json:"name"`
	Seconds  float64 `json:"t_s"`
	RSS      float64 `json:"rss_mib"`
	Anon     float64 `json:"rss_anon_mib"`
	Commands int64   `json:"commands"`
}

// runSoak runs this binary as a -soak-child, prints each sample of its RSS
// curve as it comes and then the flatness line: the RSS of the last sample
// against the first one at or after a fifth of the length (the warm-up:
// the store's pages, the broker's sessions and the queues reach their
// steady size).
func runSoak(ctx context.Context, cfg soakConfig) error {
	if cfg.length <= 0 || cfg.every <= 0 || cfg.every > cfg.length || cfg.devices < 1 || cfg.journal < 0 {
		return fmt.Errorf("-soak-for %v, -soak-every %v, -soak-devices %d and -soak-journal %d: need 0 < every <= for, devices > 0, journal >= 0",
			cfg.length, cfg.every, cfg.devices, cfg.journal)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, exe, "-soak-child", "-soak-for", cfg.length.String(), "-soak-every", cfg.every.String(),
		"-soak-devices", strconv.Itoa(cfg.devices), "-soak-journal", strconv.Itoa(cfg.journal), "-dir", cfg.dir)
	cmd.Stderr = os.Stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	cfg.out.Header("fencebench soak: one process with an embedded broker, an agent with %d sim devices (journal.max_records %d) and the load (%d in flight, steady token), %v, RSS every %v",
		cfg.devices, cfg.journal, inFlight(cfg.devices), cfg.length, cfg.every)
	samples, readErr := readSamples(pipe, cfg)
	if err := errors.Join(readErr, cmd.Wait()); err != nil {
		return fmt.Errorf("soak child: %w", err)
	}
	return printFlatness(cfg, samples)
}

// readSamples reads the child's sample lines until it closes its output,
// printing each.
func readSamples(r io.Reader, cfg soakConfig) ([]sample, error) {
	var out []sample
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var s sample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return out, fmt.Errorf("sample line %q: %w", sc.Text(), err)
		}
		out = append(out, s)
		if err := printSample(cfg, s); err != nil {
			return out, err
		}
	}
	return out, sc.Err()
}

func printSample(cfg soakConfig, s sample) error {
	if cfg.json {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(cfg.out.Out, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintf(cfg.out.Out, "soak t=%6.0fs  RSS %7.1f MiB  anonymous %7.1f MiB  commands %10d\n", s.Seconds, s.RSS, s.Anon, s.Commands)
	return err
}

func printFlatness(cfg soakConfig, samples []sample) error {
	warm := cfg.length / 5
	var ref *sample
	for i := range samples {
		if time.Duration(samples[i].Seconds*float64(time.Second)) >= warm {
			ref = &samples[i]
			break
		}
	}
	if ref == nil || len(samples) < 2 {
		return fmt.Errorf("soak: %d samples, none after the warm-up of %v", len(samples), warm)
	}
	last := samples[len(samples)-1]
	return cfg.out.Print(benchline.Line{Name: fmt.Sprintf("RSS after %v of steady load, %d devices", cfg.length, cfg.devices),
		Value: last.RSS, Unit: "MiB", Baseline: ref.RSS, BaseName: fmt.Sprintf("RSS at %.0f s (warmed up)", ref.Seconds),
		Runs: 1}.AtMost(soakGoal))
}

// soakChild is the -soak-child mode: an embedded broker, an agent with
// cfg.devices devices and the steady load in this process, for cfg.length;
// every cfg.every it writes a sample (JSON) to out.
func soakChild(ctx context.Context, cfg soakConfig, out io.Writer) error {
	opts := benchagent.Options{Journal: agent.JournalConfig{MaxRecords: cfg.journal}, Queue: soakQueue(cfg.journal)}
	return withLocalAgent(cfg.dir, "soak-", cfg.devices, opts, func(l *localAgent) error {
		ctx, cancel := context.WithTimeout(ctx, cfg.length)
		defer cancel()
		var done atomic.Int64
		loadErr := make(chan error, 1)
		go func() { loadErr <- steadyLoad(ctx, l.agent, l.broker.URL(), l.tokens, cfg.devices, &done) }()
		err := sampleUntil(ctx, cfg.every, &done, out)
		return errors.Join(err, <-loadErr)
	})
}

// soakQueue is the soak agent's limits.queue: one command is in flight per
// device, so a short queue does; it must leave the journal room for every
// command a device can have accepted (agent journal.max_records >=
// limits.queue + 2). 0 keeps the agent's default.
func soakQueue(journal int) int {
	if journal == 0 {
		return 0
	}
	return max(1, min(agent.DefaultQueue, journal-2))
}

// steadyLoad runs steady runs of soakRunOps commands until ctx ends,
// counting the commands in done.
func steadyLoad(ctx context.Context, a *benchagent.Agent, broker string, tokens *benchload.Tokens, devices int, done *atomic.Int64) error {
	load := benchagent.Load{Broker: broker, Tokens: tokens, InFlight: inFlight(devices), Done: done,
		Limit: benchload.Limit{Ops: soakRunOps}}
	for ctx.Err() == nil {
		if _, err := a.Commands(ctx, load); err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// sampleUntil writes a sample every interval until ctx ends, and a last
// one then unless one was written in the last half interval.
func sampleUntil(ctx context.Context, every time.Duration, done *atomic.Int64, out io.Writer) error {
	start := time.Now()
	last := start
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			if time.Since(last) < every/2 {
				return nil
			}
			return writeSample(out, start, done)
		}
		if err := writeSample(out, start, done); err != nil {
			return err
		}
		last = time.Now()
	}
}

func writeSample(out io.Writer, start time.Time, done *atomic.Int64) error {
	rss, err := benchagent.RSS()
	if err != nil {
		return err
	}
	anon, err := benchagent.RSSAnon()
	if err != nil {
		return err
	}
	s := sample{Name: "soak RSS sample", Seconds: time.Since(start).Seconds(), RSS: mib(rss), Anon: mib(anon), Commands: done.Load()}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", strings.TrimSpace(string(b)))
	return err
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
