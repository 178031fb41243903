// Command fencebench-etcd prints the controller's grant figures on etcd,
// in fencebench's line format: in one run it starts an in-process etcd
// cluster on loopback (data in a scratch directory on the disk measured),
// measures the raw write+fdatasync loop of that disk, the controller's
// grants on the etcd store at 1 and 100 domains, and etcd's own
// concurrency.Mutex lock+unlock loop at the same concurrency — the
// yardstick of what one etcd hand-over costs. It lives in the etcd test
// module so that the main module does not depend on the etcd server.
//
// Usage (from lease/etcdstore/etcdtest):
//
//	go run ./cmd/fencebench-etcd [-quick] [-json] [-runs 3] [-members 3] [-dir DIR]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/internal/benchline"
	"github.com/fencegate/fencegate/lease/etcdstore/etcdtest"
)

func main() {
	var cfg config
	var asJSON, asMarkdown bool
	flag.BoolVar(&cfg.quick, "quick", false, "1 s per measurement instead of 3 s")
	flag.BoolVar(&asJSON, "json", false, "one JSON object per line (name, value, unit, baseline, ratio, goal, met)")
	flag.BoolVar(&asMarkdown, "markdown", false, "Markdown table rows (for docs/benchmarks.md)")
	flag.IntVar(&cfg.runs, "runs", 3, "measurements per figure; the median is printed")
	flag.IntVar(&cfg.members, "members", 3, "etcd cluster members (in this process)")
	flag.StringVar(&cfg.dir, "dir", "", "directory on the disk to measure; a scratch directory is made in it and removed at exit (default os.TempDir())")
	flag.Parse()
	cfg.d = 3 * time.Second
	if cfg.quick {
		cfg.d = time.Second
	}
	cfg.out = &benchline.Printer{Out: os.Stdout, JSON: asJSON, Markdown: asMarkdown && !asJSON}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, cfg)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencebench-etcd:", err)
		os.Exit(1)
	}
}

// config is the command's flags.
type config struct {
	quick   bool
	d       time.Duration // length of each measurement
	runs    int
	members int
	dir     string
	out     *benchline.Printer
}

func run(ctx context.Context, cfg config) (err error) {
	if cfg.runs < 1 || cfg.members < 1 {
		return fmt.Errorf("-runs %d and -members %d must be positive", cfg.runs, cfg.members)
	}
	r, err := newRunner(cfg.dir)
	if err != nil {
		return err
	}
	defer r.close()
	return r.do(func() error {
		cfg.out.Header("fencebench-etcd: grant figures on a %d-member etcd cluster in this process, median of %d, %s/%s, GOMAXPROCS=%d, %s, quick=%v",
			cfg.members, cfg.runs, runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.Version(), cfg.quick)
		c := etcdtest.StartCluster(r, cfg.members)
		return measure(ctx, r, c, cfg)
	})
}
