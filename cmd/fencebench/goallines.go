package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/fencegate/fencegate/internal/benchline"
)

// scaleRef is the device count the scaling figures compare with.
const scaleRef = 100

func (s *suite) med(n int, m mode) (rate, p50, p99 float64) {
	st := s.stats(n, m)
	return benchline.Median(st.rate), benchline.Median(st.p50), benchline.Median(st.p99)
}

// printDevices prints the lines whose figures are measured once n's
// devices are.
func (s *suite) printDevices(n int) error {
	var lines []benchline.Line
	switch {
	case n == 1:
		lines = s.loneLines()
	case n == scaleRef:
		lines = s.refLines()
	case n > scaleRef && s.res[key{scaleRef, steady}] != nil:
		lines = s.scaleLines(n)
	default:
		lines = s.bareLines(n)
	}
	for _, l := range lines {
		if err := s.cfg.out.Print(l); err != nil {
			return err
		}
	}
	return nil
}

func (s *suite) loneLines() []benchline.Line {
	_, bareP50, _ := s.med(1, bare)
	_, commitP50, _ := s.med(1, commit)
	var out []benchline.Line
	for _, m := range []mode{steady, advancing} {
		_, p50, _ := s.med(1, m)
		out = append(out, benchline.Line{Name: fmt.Sprintf("agent 1 device, 1 in flight, %s token: p50", m), Value: p50, Unit: "ms",
			Baseline: bareP50 + 2*commitP50, BaseName: "bare round trip p50 + 2 bbolt commits p50", Runs: s.cfg.runs}.AtMost(1.2))
	}
	return out
}

func (s *suite) refLines() []benchline.Line {
	goal := map[mode]float64{steady: 0.5, advancing: 0.4}
	return s.vsBare(scaleRef, goal)
}

// bareLines compares n devices with bare MQTT at the same concurrency
// (used when there is no reference count to scale against).
func (s *suite) bareLines(n int) []benchline.Line {
	return s.vsBare(n, map[mode]float64{steady: 0.5, advancing: 0.4})
}

func (s *suite) vsBare(n int, goal map[mode]float64) []benchline.Line {
	bareRate, _, _ := s.med(n, bare)
	var out []benchline.Line
	for _, m := range []mode{steady, advancing} {
		rate, _, _ := s.med(n, m)
		out = append(out, benchline.Line{Name: fmt.Sprintf("agent %d devices, %d in flight, %s token", n, inFlight(n), m),
			Value: rate, Unit: "cmds/s", Baseline: bareRate, Runs: s.cfg.runs,
			BaseName: fmt.Sprintf("bare MQTT, %d in flight", inFlight(n))}.AtLeast(goal[m]))
	}
	return out
}

// scaleLines compares n devices with scaleRef devices at the same
// concurrency: throughput within 15 %, p99 no worse than in flight ÷
// throughput predicts.
func (s *suite) scaleLines(n int) []benchline.Line {
	var out []benchline.Line
	for _, m := range []mode{steady, advancing} {
		rate, _, p99 := s.med(n, m)
		refRate, _, refP99 := s.med(scaleRef, m)
		out = append(out, benchline.Line{Name: fmt.Sprintf("agent %d devices, %d in flight, %s token", n, inFlight(n), m),
			Value: rate, Unit: "cmds/s", Baseline: refRate, Runs: s.cfg.runs,
			BaseName: fmt.Sprintf("agent %d devices, same load", scaleRef)}.AtLeast(0.85))
		out = append(out, benchline.Line{Name: fmt.Sprintf("agent %d devices, %d in flight, %s token: p99", n, inFlight(n), m),
			Value: p99, Unit: "ms", Baseline: refP99 * benchline.RatioOf(refRate, rate), Runs: s.cfg.runs,
			BaseName: fmt.Sprintf("p99 at %d devices × its throughput ÷ this one", scaleRef)}.AtMost(1.0))
	}
	return out
}

// rssDevices is the idle agent measured for memory per device.
const rssDevices = 10000

// measureRSS starts a child process (this binary, -rss-child) with 1 and
// with rssDevices idle devices and prints the memory lines.
func (s *suite) measureRSS(ctx context.Context) error {
	one, err := s.childRSS(ctx, 1)
	if err != nil {
		return err
	}
	many, err := s.childRSS(ctx, rssDevices)
	if err != nil {
		return err
	}
	s.cfg.out.Header("RSS of an idle agent process (embedded broker, 1 device): %.1f MiB", float64(one)/(1<<20))
	perDev := float64(many-one) / float64(rssDevices-1) / 1024
	lines := []benchline.Line{
		benchline.Line{Name: fmt.Sprintf("RSS per idle device, %d devices", rssDevices), Value: perDev, Unit: "KiB",
			Baseline: 16, BaseName: "goal: 16 KiB", Runs: 1}.AtMost(1),
		benchline.Line{Name: fmt.Sprintf("RSS, %d idle devices (whole process)", rssDevices), Value: float64(many) / (1 << 20),
			Unit: "MiB", Baseline: 256, BaseName: "goal: 256 MiB", Runs: 1}.AtMost(1),
	}
	for _, l := range lines {
		if err := s.cfg.out.Print(l); err != nil {
			return err
		}
	}
	return nil
}

// childRSS runs this binary with -rss-child n and returns the RSS it
// reports, in bytes.
func (s *suite) childRSS(ctx context.Context, n int) (int64, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, exe, "-rss-child", strconv.Itoa(n), "-dir", s.dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("rss child (%d devices): %w: %s", n, err, strings.TrimSpace(stderr.String()))
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("rss child (%d devices) printed %q", n, out)
	}
	return v, nil
}
