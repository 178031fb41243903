package simmodbus

import (
	"encoding/binary"
	"io"
	"sync"
	"time"

	"github.com/fencegate/fencegate/devices/modbus"
	"github.com/fencegate/fencegate/transport/serial"
)

// requestGap is the silence that ends an incomplete request on the
// simulator's side of the line.
const requestGap = 50 * time.Millisecond

// RTUServer serves a PLC over Modbus RTU on a wire: a pseudo-terminal
// whose slave a symlink points at (ServeRTU), which Unplug and Plug take
// away and bring back, or a real serial port (ServeRTUPort).
type RTUServer struct {
	p    *PLC
	link string // "" for a real port
	open func() (wire, error)

	mu   sync.Mutex // guards w and done
	w    wire
	done chan struct{} // closed when the current wire's loop ends
}

// ServeRTU creates a pseudo-terminal, points link at its slave and serves
// p on it.
func ServeRTU(p *PLC, link string) (*RTUServer, error) {
	s := &RTUServer{p: p, link: link, open: func() (wire, error) { return openPTY(link) }}
	return s, s.Plug()
}

// ServeRTUPort serves p on a real serial port (the far end of a cable to
// the agent).
func ServeRTUPort(p *PLC, port serial.Config) (*RTUServer, error) {
	s := &RTUServer{p: p, open: func() (wire, error) { return openPort(port) }}
	return s, s.Plug()
}

// Node is the device node served now ("" while unplugged).
func (s *RTUServer) Node() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return ""
	}
	return s.w.Node()
}

// Plug opens a new wire (a new pseudo-terminal at the same link) and
// serves on it. Plugging a plugged server does nothing.
func (s *RTUServer) Plug() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		return nil
	}
	w, err := s.open()
	if err != nil {
		return err
	}
	s.w, s.done = w, make(chan struct{})
	go s.serve(w, s.done)
	return nil
}

// Unplug closes the wire, as a pulled cable: the link is removed, and an
// agent holding the old terminal reads an error. It returns once the
// serving loop has ended. Unplugging an unplugged server does nothing.
func (s *RTUServer) Unplug() {
	s.mu.Lock()
	w, done := s.w, s.done
	s.w = nil
	s.mu.Unlock()
	if w != nil {
		w.Close()
		<-done
	}
}

// Close unplugs the server for good.
func (s *RTUServer) Close() error {
	s.Unplug()
	return nil
}

// serve reads requests from w until it fails (closed).
func (s *RTUServer) serve(w wire, done chan struct{}) {
	defer close(done)
	dec := modbus.NewRTUDecoder(modbus.Requests, requestGap)
	buf := make([]byte, 512)
	var frames [][]byte
	for {
		n, err := w.Read(buf)
		if err != nil {
			return
		}
		dec.Feed(buf[:n], func(m serial.Msg) {
			if m.Err == nil {
				frames = append(frames, m.Data)
			}
		})
		for _, f := range frames {
			s.answer(w, f)
		}
		frames = frames[:0]
	}
}

// answer runs one request frame and writes its response, faults applied.
func (s *RTUServer) answer(w io.Writer, frame []byte) {
	unit, req := modbus.SplitRTU(frame)
	if unit != s.p.cfg.Unit && unit != 0 {
		return // another device on the bus
	}
	addr, n := span(req)
	f, latency := s.p.take(addr, n)
	time.Sleep(latency)
	var res modbus.PDU
	if f.Exception != 0 {
		res = exceptionPDU(req.Function, f.Exception)
	} else if !f.Lose {
		res = s.p.exec(req)
	}
	if unit == 0 || f.Drop || f.Lose {
		return // broadcasts get no response
	}
	if res.Function&0x80 != 0 {
		s.p.exception()
	}
	s.respond(w, unit, res, f)
}

func (s *RTUServer) respond(w io.Writer, unit byte, res modbus.PDU, f Fault) {
	adu := modbus.EncodeRTU(unit, res)
	switch {
	case f.Late > 0:
		time.Sleep(f.Late)
	case f.Garble:
		adu[len(adu)-1] ^= 0x5A
	case f.Noise:
		adu = append([]byte{0x00, 0xFF, 0x13, 0x37, 0x42}, adu...)
	}
	w.Write(adu)
}

// span is the addresses a request names (one for FC 05/06).
func span(req modbus.PDU) (addr, n int) {
	if len(req.Data) < 4 {
		return 0, 0
	}
	addr, n = int(binary.BigEndian.Uint16(req.Data)), int(binary.BigEndian.Uint16(req.Data[2:]))
	if req.Function == modbus.FuncWriteCoil || req.Function == modbus.FuncWriteRegister {
		n = 1
	}
	return addr, n
}

func exceptionPDU(fn, code byte) modbus.PDU {
	return modbus.PDU{Function: fn | 0x80, Data: []byte{code}}
}

// exec runs one request PDU against the tables and returns the response
// PDU (an exception response for a request it refuses).
func (p *PLC) exec(req modbus.PDU) modbus.PDU {
	res, err := p.dispatch(req)
	if err != nil {
		return exceptionPDU(req.Function, exceptionCode(err))
	}
	return res
}

func (p *PLC) dispatch(req modbus.PDU) (modbus.PDU, error) {
	d := req.Data
	if len(d) < 4 {
		return modbus.PDU{}, exceptionError(3)
	}
	addr, qty := int(binary.BigEndian.Uint16(d)), int(binary.BigEndian.Uint16(d[2:]))
	switch req.Function {
	case modbus.FuncReadCoils, modbus.FuncReadDiscreteInputs:
		return p.execReadBits(req, addr, qty)
	case modbus.FuncReadHolding, modbus.FuncReadInput:
		return p.execReadRegs(req, addr, qty)
	case modbus.FuncWriteCoil:
		if qty != 0xFF00 && qty != 0 {
			return modbus.PDU{}, exceptionError(3)
		}
		return echo(req, p.writeCoils(addr, []bool{qty == 0xFF00}))
	case modbus.FuncWriteRegister:
		return echo(req, p.writeRegs(addr, []uint16{uint16(qty)}))
	case modbus.FuncWriteCoils:
		return p.execWriteCoils(req, addr, qty)
	case modbus.FuncWriteRegisters:
		return p.execWriteRegs(req, addr, qty)
	}
	return modbus.PDU{}, exceptionError(1)
}

// echo is a write's response: the request's address and value (or
// quantity), unless err.
func echo(req modbus.PDU, err error) (modbus.PDU, error) {
	return modbus.PDU{Function: req.Function, Data: req.Data[:4]}, err
}

func (p *PLC) execReadBits(req modbus.PDU, addr, qty int) (modbus.PDU, error) {
	if qty < 1 || qty > modbus.MaxReadBits {
		return modbus.PDU{}, exceptionError(3)
	}
	bits, err := p.readBits(addr, qty, req.Function == modbus.FuncReadDiscreteInputs)
	packed := modbus.PackBits(bits)
	return modbus.PDU{Function: req.Function, Data: append([]byte{byte(len(packed))}, packed...)}, err
}

func (p *PLC) execReadRegs(req modbus.PDU, addr, qty int) (modbus.PDU, error) {
	if qty < 1 || qty > modbus.MaxReadRegisters {
		return modbus.PDU{}, exceptionError(3)
	}
	regs, err := p.readRegs(addr, qty, req.Function == modbus.FuncReadInput)
	out := []byte{byte(2 * len(regs))}
	for _, v := range regs {
		out = binary.BigEndian.AppendUint16(out, v)
	}
	return modbus.PDU{Function: req.Function, Data: out}, err
}

func (p *PLC) execWriteCoils(req modbus.PDU, addr, qty int) (modbus.PDU, error) {
	d := req.Data
	if qty < 1 || qty > modbus.MaxWriteCoils || len(d) != 5+(qty+7)/8 || int(d[4]) != (qty+7)/8 {
		return modbus.PDU{}, exceptionError(3)
	}
	return echo(req, p.writeCoils(addr, modbus.UnpackBits(d[5:], qty)))
}

func (p *PLC) execWriteRegs(req modbus.PDU, addr, qty int) (modbus.PDU, error) {
	d := req.Data
	if qty < 1 || qty > modbus.MaxWriteRegisters || len(d) != 5+2*qty || int(d[4]) != 2*qty {
		return modbus.PDU{}, exceptionError(3)
	}
	v := make([]uint16, qty)
	for i := range v {
		v[i] = binary.BigEndian.Uint16(d[5+2*i:])
	}
	return echo(req, p.writeRegs(addr, v))
}
