package simmodbus

import (
	"io"
	"log"
	"net"
	"time"

	mb "github.com/simonvetter/modbus"
)

// holdFor bounds how long a dropped or lost request's handler holds its
// session before giving up (Close ends it sooner).
const holdFor = time.Minute

// TCPServer serves a PLC over Modbus TCP with github.com/simonvetter/modbus's
// server.
type TCPServer struct {
	srv  *mb.ModbusServer
	addr string
}

// ServeTCP listens on addr ("127.0.0.1:0" picks a port) and serves p. Over
// TCP, Drop and Lose hold the response back (until Close, or a minute)
// instead of never sending it — the library always answers in the end, by
// when the client has given up the connection; Garble and Noise do
// nothing.
func ServeTCP(p *PLC, addr string) (*TCPServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	bound := l.Addr().String()
	l.Close() // the library listens itself; take the port it was given
	srv, err := mb.NewServer(&mb.ServerConfiguration{URL: "tcp://" + bound, MaxClients: 16, Timeout: 10 * time.Minute,
		Logger: log.New(io.Discard, "", 0)}, handler{p})
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	return &TCPServer{srv: srv, addr: bound}, nil
}

// Addr is the host:port the server listens on.
func (s *TCPServer) Addr() string { return s.addr }

// Close stops listening and closes every session. Close the PLC first,
// so that sessions holding a response back end.
func (s *TCPServer) Close() error { return s.srv.Stop() }

// handler adapts a PLC to the library's RequestHandler, with faults.
type handler struct{ p *PLC }

var _ mb.RequestHandler = handler{}

// serve runs one request: its fault and latency around apply.
func (h handler) serve(addr, n uint16, apply func() error) error {
	f, latency := h.p.take(int(addr), int(n))
	time.Sleep(latency)
	var err error
	switch {
	case f.Exception != 0:
		err = exceptionError(f.Exception)
	case f.Lose:
		h.p.holdBack(holdFor)
		err = mb.ErrServerDeviceFailure
	default:
		err = apply()
	}
	switch {
	case f.Drop:
		h.p.holdBack(holdFor)
	case f.Late > 0:
		time.Sleep(f.Late)
	}
	if err != nil {
		h.p.exception()
	}
	return err
}

// exception counts a request answered with an exception.
func (p *PLC) exception() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Exceptions++
}

func (h handler) HandleCoils(req *mb.CoilsRequest) (res []bool, err error) {
	err = h.serve(req.Addr, req.Quantity, func() error {
		if req.IsWrite {
			return h.p.writeCoils(int(req.Addr), req.Args)
		}
		res, err = h.p.readBits(int(req.Addr), int(req.Quantity), false)
		return err
	})
	return res, err
}

func (h handler) HandleDiscreteInputs(req *mb.DiscreteInputsRequest) (res []bool, err error) {
	err = h.serve(req.Addr, req.Quantity, func() error {
		res, err = h.p.readBits(int(req.Addr), int(req.Quantity), true)
		return err
	})
	return res, err
}

func (h handler) HandleHoldingRegisters(req *mb.HoldingRegistersRequest) (res []uint16, err error) {
	err = h.serve(req.Addr, req.Quantity, func() error {
		if req.IsWrite {
			return h.p.writeRegs(int(req.Addr), req.Args)
		}
		res, err = h.p.readRegs(int(req.Addr), int(req.Quantity), false)
		return err
	})
	return res, err
}

func (h handler) HandleInputRegisters(req *mb.InputRegistersRequest) (res []uint16, err error) {
	err = h.serve(req.Addr, req.Quantity, func() error {
		res, err = h.p.readRegs(int(req.Addr), int(req.Quantity), true)
		return err
	})
	return res, err
}
