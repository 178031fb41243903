package persist_test

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/benchload"
)

// Every benchmark here makes every operation durable (fsynced) and reports,
// besides ns/op, its rates next to the raw write+fdatasync rate of the same
// directory measured in the same run:
//
//	ops/s or accepts/s  operations per second over all devices
//	commits/s           fsynced commits per second
//	ops/commit          operations per commit (the group-commit factor)
//	raw_fsyncs/s        write 4 KiB + fdatasync loop, same directory
//	ratio               operations per second / raw fsyncs per second
//
// cmd/fencebench prints the same figures as a table, with latencies.

// benchDevices are the concurrent device counts of the foundation issue.
var benchDevices = []int{1, 10, 100}

// rawFsyncTime is how long each run measures the raw fsync rate.
const rawFsyncTime = time.Second

// BenchmarkAccept: one goroutine per device, each accepting a new command
// with a token that raises its fence every time.
func BenchmarkAccept(b *testing.B) { benchAcceptLoad(b, false) }

// BenchmarkAcceptSteadyToken: as BenchmarkAccept, but every command carries
// the same token, as between lease changes: the fence is read, not written.
func BenchmarkAcceptSteadyToken(b *testing.B) { benchAcceptLoad(b, true) }

func benchAcceptLoad(b *testing.B, steady bool) {
	tokens, err := benchload.NewTokens()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range benchDevices {
		b.Run(fmt.Sprintf("devices=%d", n), func(b *testing.B) { benchAccept(b, tokens, n, steady) })
	}
}

func benchAccept(b *testing.B, tokens *benchload.Tokens, devices int, steady bool) {
	dir := b.TempDir()
	if err := tokens.Grow(devices, benchload.Share(b.N, devices, 0)); err != nil {
		b.Fatal(err)
	}
	load, err := benchload.OpenAcceptLoad(filepath.Join(dir, "fence.db"), tokens, devices, steady)
	if err != nil {
		b.Fatal(err)
	}
	defer mustClose(b, load)
	raw := mustRawFsync(b, dir)
	res := runTimed(b, devices, load.Op)
	commits, ops := load.Commits()
	report(b, "accepts/s", res, raw, commits, ops)
}

// BenchmarkBoltUpdateEach is the baseline without group commit: the same
// devices, one plain bbolt Update (one fsynced commit) per operation.
func BenchmarkBoltUpdateEach(b *testing.B) { benchBoltLoad(b, false) }

// BenchmarkBoltBatch is bbolt's own batching, DB.Batch with its default
// 10 ms MaxBatchDelay and 1000 MaxBatchSize.
func BenchmarkBoltBatch(b *testing.B) { benchBoltLoad(b, true) }

func benchBoltLoad(b *testing.B, batch bool) {
	tokens, err := benchload.NewTokens()
	if err != nil {
		b.Fatal(err)
	}
	value := benchload.RecordValue(tokens.At(0, 0).Raw)
	for _, n := range benchDevices {
		b.Run(fmt.Sprintf("devices=%d", n), func(b *testing.B) { benchBolt(b, n, batch, value) })
	}
}

func benchBolt(b *testing.B, devices int, batch bool, value []byte) {
	dir := b.TempDir()
	load, err := benchload.OpenBoltLoad(filepath.Join(dir, "bolt.db"), devices, batch, value)
	if err != nil {
		b.Fatal(err)
	}
	defer mustClose(b, load)
	raw := mustRawFsync(b, dir)
	res := runTimed(b, devices, load.Op)
	commits, err := load.Commits()
	if err != nil {
		b.Fatal(err)
	}
	report(b, "ops/s", res, raw, commits, int64(res.Ops))
}

// mustRawFsync measures the raw fsync rate of dir, before the timer starts.
func mustRawFsync(b *testing.B, dir string) benchload.Result {
	b.Helper()
	raw, err := benchload.RawFsync(b.Context(), dir, rawFsyncTime)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// runTimed runs b.N operations of op over devices with only the run timed.
func runTimed(b *testing.B, devices int, op benchload.Op) benchload.Result {
	b.Helper()
	b.ResetTimer()
	res, err := benchload.Run(b.Context(), devices, benchload.Limit{Ops: b.N}, op)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	return res
}

// report sets the custom metrics; rateUnit names the operations per second.
func report(b *testing.B, rateUnit string, res, raw benchload.Result, commits, committedOps int64) {
	rate := res.Rate()
	b.ReportMetric(rate, rateUnit)
	b.ReportMetric(benchload.PerSecond(commits, res.Elapsed), "commits/s")
	if commits > 0 {
		b.ReportMetric(float64(committedOps)/float64(commits), "ops/commit")
	}
	b.ReportMetric(raw.Rate(), "raw_fsyncs/s")
	if raw.Rate() > 0 {
		b.ReportMetric(rate/raw.Rate(), "ratio")
	}
}

func mustClose(b *testing.B, c io.Closer) {
	if err := c.Close(); err != nil {
		b.Error(err)
	}
}
