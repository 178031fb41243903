// Package simfirmware is the reference firmware simulator: it speaks the
// fencegate firmware protocol v1 (frame) or a SCPI-like line protocol on a
// pseudo-terminal (or a real serial port), keeps its highest token per
// domain in a file, and injects faults when told to on its control input.
// The command hwtest/cmd/simfirmware runs it; a program that needs the
// simulator as a child process can also call Run from its own binary.
//
//	simfirmware --protocol frame --link /tmp/fw0 --state /tmp/fw0.state --log /tmp/fw0.log
//
// Flags:
//
//	--protocol frame|line  wire protocol (default frame)
//	--link PATH            create a pseudo-terminal and keep the symlink PATH pointing at it
//	--port PATH            serve on this real serial port instead (exactly one of --link, --port)
//	--baud N               baud rate of --port (default 115200)
//	--state PATH           file keeping the highest token per domain (frame protocol)
//	--log PATH             append-only apply log (see below)
//	--device ID            device id written in the apply log (default: the base name of --link, or of --port)
//
// It prints "ready <node>" when it serves (again after each reboot) and
// answers each control line with "ok", "ok <json>" or "error <why>".
// Control lines: delay <duration>, drop, garble, noise (each for the next
// reply), junk (garbage now), stall, resume (the line toward the firmware
// stops carrying bytes, and starts again), unplug, plug, reboot <duration>,
// stats. See hwtest/README.md.
//
// The apply log holds one JSON line per command the firmware applied — not
// the ones it refused (stale token, bad request, unknown op, bad args), not
// a repeated id answered from its reply cache — in the format of
// devices/sim.Entry, so devices/sim.ReadLog reads it. Each line is written
// with one write(2) on a file opened with O_APPEND, before the command takes
// effect; it is not fsynced. A frame entry has the request's id, op, domain,
// epoch, seq, holder and args as received (compacted, absent if empty), and
// idempotent set for "get", the firmware's one read-only op. A line entry has
// the command word as op ("SET", "PULSE") and its parameters as a JSON array
// of strings in args; the line protocol carries no token and no id, so its
// domain, holder and id are empty and its position zero (devices/sim.CheckLog's
// duplicate-id rule does not fit such entries). Started is when the firmware
// took the request off the wire, At when it applied it.
package simfirmware

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
)

// options are the command-line flags.
type options struct {
	protocol string
	link     string
	port     string
	state    string
	baud     int
	log      string
	device   string
}

// parseFlags parses args; the default device id is the base name of the
// link or port.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("simfirmware", flag.ContinueOnError)
	fs.StringVar(&o.protocol, "protocol", "frame", "wire protocol: frame or line")
	fs.StringVar(&o.link, "link", "", "create a pseudo-terminal and keep this symlink pointing at it")
	fs.StringVar(&o.port, "port", "", "serve on this real serial port instead of a pseudo-terminal")
	fs.StringVar(&o.state, "state", "", "file keeping the highest token per domain (frame protocol)")
	fs.IntVar(&o.baud, "baud", 115200, "baud rate of --port")
	fs.StringVar(&o.log, "log", "", "append one JSON line per applied command to this file (devices/sim apply log format)")
	fs.StringVar(&o.device, "device", "", "device id in the apply log (default: the base name of --link or --port)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.protocol != "frame" && o.protocol != "line":
		return o, fmt.Errorf("--protocol %q: want frame or line", o.protocol)
	case (o.link == "") == (o.port == ""):
		return o, fmt.Errorf("give exactly one of --link and --port")
	}
	if o.device == "" {
		o.device = filepath.Base(o.link + o.port)
	}
	return o, nil
}

// Run runs the simulator with the command-line flags args (without the
// program name): it boots the firmware, writes "ready <node>" and the
// answers to control lines to stdout, and reads control lines from stdin.
// It returns nil when ctx is done or stdin ends, having closed the wire and
// the apply log, or an error if the flags are bad or the firmware cannot
// start. If ctx ends first, a goroutine stays blocked reading stdin until
// that ends; it obeys nothing and writes nothing after Run has returned.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	fw, err := newFirmware(o, stdout)
	if err != nil {
		return err
	}
	defer fw.shutdown()
	if err := fw.boot(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fw.control(stdin)
	}()
	select { // the firmware lives until signalled or its controller goes away
	case <-ctx.Done():
	case <-done:
	}
	return nil
}
