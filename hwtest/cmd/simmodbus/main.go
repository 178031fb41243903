// Command simmodbus is a simulated Modbus device (a PLC with the
// reference PLC-side fence and fault injection) serving RTU on a
// pseudo-terminal or a real serial port, and/or Modbus TCP.
//
//	simmodbus --link /tmp/plc0 --fence 1000 --fence-status --state /tmp/plc0.state
//	simmodbus --tcp 127.0.0.1:1502 --fence 1000
//
// It prints "ready rtu <node>" and "ready tcp <addr>" when it serves and
// answers control lines on stdin; closing stdin, SIGINT or SIGTERM ends
// it. The flags and control lines are those of package hwtest/simmodbus
// (see hwtest/README.md); it exits 1 with the error if it cannot run.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/fencegate/fencegate/hwtest/simmodbus"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := simmodbus.Run(ctx, os.Args[1:], os.Stdin, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "simmodbus:", err)
		os.Exit(1)
	}
}
