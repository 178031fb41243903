// Command simfirmware is the reference firmware simulator: it speaks the
// fencegate firmware protocol v1 (frame) or a SCPI-like line protocol on a
// pseudo-terminal (or a real serial port), keeps its highest token per
// domain in a file, optionally logs every command it applies, and injects
// faults when told to on its standard input.
//
//	simfirmware --protocol frame --link /tmp/fw0 --state /tmp/fw0.state [--log /tmp/fw0.log --device fw0]
//
// It prints "ready <node>" when it serves and answers control lines on
// stdin; closing stdin, SIGINT or SIGTERM ends it. The flags, control lines
// and apply log are those of package hwtest/simfirmware (see its doc and
// hwtest/README.md); it exits 1 with the error if the simulator cannot run.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/fencegate/fencegate/hwtest/simfirmware"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := simfirmware.Run(ctx, os.Args[1:], os.Stdin, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "simfirmware:", err)
		os.Exit(1)
	}
}
