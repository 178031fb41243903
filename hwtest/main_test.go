package hwtest

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Real-hardware targets; empty means the simulated firmware.
var (
	framePort = flag.String("hwtest.frame-port", "", "serial port of a real frame-protocol (firmware protocol v1) target")
	linePort  = flag.String("hwtest.line-port", "", "serial port of a real line-protocol target (reference command set)")
	baud      = flag.Int("hwtest.baud", 115200, "baud rate of the real ports")
)

// simBin is the simulator binary built for this run; "" if it could not be
// built (simErr says why).
var (
	simBin string
	simErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "hwtest-sim")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	simBin, simErr = BuildSim(dir)
	code := 0
	// goleak after the run, then the temp dir: VerifyTestMain would exit first.
	code = m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
