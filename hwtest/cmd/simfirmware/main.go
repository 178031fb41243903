// Command simfirmware is the reference firmware simulator: it speaks the
// fencegate firmware protocol v1 (frame) or a SCPI-like line protocol on a
// pseudo-terminal (or a real serial port), keeps its highest token per
// domain in a file, and injects faults when told to on its standard input.
//
//	simfirmware --protocol frame --link /tmp/fw0 --state /tmp/fw0.state
//
// It prints "ready <node>" when it serves (again after each reboot) and
// answers each control line with "ok", "ok <json>" or "error <why>".
// Control lines: delay <duration>, drop, garble, noise (each for the next
// reply), junk (garbage now), stall, resume (the line toward the firmware
// stops carrying bytes, and starts again), unplug, plug, reboot <duration>,
// stats. See hwtest/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "simfirmware:", err)
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	protocol string
	link     string
	port     string
	state    string
	baud     int
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("simfirmware", flag.ContinueOnError)
	fs.StringVar(&o.protocol, "protocol", "frame", "wire protocol: frame or line")
	fs.StringVar(&o.link, "link", "", "create a pseudo-terminal and keep this symlink pointing at it")
	fs.StringVar(&o.port, "port", "", "serve on this real serial port instead of a pseudo-terminal")
	fs.StringVar(&o.state, "state", "", "file keeping the highest token per domain (frame protocol)")
	fs.IntVar(&o.baud, "baud", 115200, "baud rate of --port")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.protocol != "frame" && o.protocol != "line":
		return o, fmt.Errorf("--protocol %q: want frame or line", o.protocol)
	case (o.link == "") == (o.port == ""):
		return o, fmt.Errorf("give exactly one of --link and --port")
	}
	return o, nil
}

func run(ctx context.Context, args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	fw, err := newFirmware(o)
	if err != nil {
		return err
	}
	defer fw.shutdown()
	fw.out = os.Stdout
	if err := fw.boot(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fw.control(os.Stdin, os.Stdout)
	}()
	select { // the firmware lives until signalled or its controller goes away
	case <-ctx.Done():
	case <-done:
	}
	return nil
}
