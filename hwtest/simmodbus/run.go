package simmodbus

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sync"

	"github.com/fencegate/fencegate/transport/serial"
)

// options are the command-line flags.
type options struct {
	link, port, tcp, state string
	baud, unit, size       int
	parity, stopBits       string
	fence, fenceWords      int
	fenceStatus            bool
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("simmodbus", flag.ContinueOnError)
	fs.StringVar(&o.link, "link", "", "serve RTU on a new pseudo-terminal and keep this symlink pointing at it")
	fs.StringVar(&o.port, "port", "", "serve RTU on this real serial port instead")
	fs.IntVar(&o.baud, "baud", 19200, "baud rate of --port")
	fs.StringVar(&o.parity, "parity", "even", "parity of --port: none, odd or even")
	fs.StringVar(&o.stopBits, "stop-bits", "1", "stop bits of --port: 1 or 2")
	fs.StringVar(&o.tcp, "tcp", "", "serve Modbus TCP on this address (host:port)")
	fs.IntVar(&o.unit, "unit", 1, "RTU unit address, 1..247")
	fs.IntVar(&o.size, "size", 10000, "addresses per table")
	fs.IntVar(&o.fence, "fence", -1, "first fence register (holding); -1: no PLC fence")
	fs.IntVar(&o.fenceWords, "fence-words", 4, "fence registers: 4 (layout seq) or 8 (layout epoch_seq)")
	fs.BoolVar(&o.fenceStatus, "fence-status", false, "judge the fence in a scan and answer in the status register after the block (else refuse by exception)")
	fs.StringVar(&o.state, "state", "", "file keeping the fence's highest position")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.link != "" && o.port != "":
		return o, fmt.Errorf("give at most one of --link and --port")
	case o.link == "" && o.port == "" && o.tcp == "":
		return o, fmt.Errorf("give --link, --port or --tcp")
	case o.unit < 1 || o.unit > 247:
		return o, fmt.Errorf("--unit %d: want 1..247", o.unit)
	case o.fence >= 0 && o.fenceWords != 4 && o.fenceWords != 8:
		return o, fmt.Errorf("--fence-words %d: want 4 or 8", o.fenceWords)
	}
	return o, nil
}

func (o options) config() Config {
	c := Config{Unit: byte(o.unit), Size: o.size, StateFile: o.state}
	if o.fence >= 0 {
		c.Fence = &Fence{Address: uint16(o.fence), Words: o.fenceWords, Status: o.fenceStatus}
	}
	return c
}

// sim is a running simulator: its PLC, its servers and its output.
type sim struct {
	p   *PLC
	rtu *RTUServer
	tcp *TCPServer
	mu  sync.Mutex // serializes writes to out
	out io.Writer
}

// Run runs the simulator with the command-line flags args (without the
// program name): it prints "ready rtu <node>" and "ready tcp <addr>" once
// it serves, answers control lines from stdin on stdout ("ok", "ok <json>"
// or "error <why>"), and returns nil when ctx is done or stdin ends,
// having stopped serving; an error if the flags are bad or it cannot
// serve. If ctx ends first, a goroutine stays blocked reading stdin until
// that ends; it obeys nothing after Run has returned.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	s, err := start(o, stdout)
	if err != nil {
		return err
	}
	defer s.stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.control(stdin)
	}()
	select {
	case <-ctx.Done():
	case <-done:
	}
	return nil
}

func start(o options, out io.Writer) (*sim, error) {
	p, err := NewPLC(o.config())
	if err != nil {
		return nil, err
	}
	s := &sim{p: p, out: out}
	if err := s.serve(o); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *sim) serve(o options) error {
	var err error
	switch {
	case o.link != "":
		s.rtu, err = ServeRTU(s.p, o.link)
	case o.port != "":
		s.rtu, err = ServeRTUPort(s.p, serial.Config{Path: o.port, Baud: o.baud, Parity: o.parity, StopBits: o.stopBits})
	}
	if err != nil {
		return err
	}
	if s.rtu != nil {
		s.say("ready rtu %s", s.rtu.Node())
	}
	if o.tcp != "" {
		if s.tcp, err = ServeTCP(s.p, o.tcp); err != nil {
			return err
		}
		s.say("ready tcp %s", s.tcp.Addr())
	}
	return nil
}

// stop ends serving; the PLC first, so that held responses end.
func (s *sim) stop() {
	s.p.Close()
	if s.rtu != nil {
		s.rtu.Close()
	}
	if s.tcp != nil {
		s.tcp.Close()
	}
}

func (s *sim) say(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, format+"\n", args...)
}
