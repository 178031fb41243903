package simmodbus

import (
	"errors"

	mb "github.com/simonvetter/modbus"
)

// exceptions maps exception codes to the library's errors, which its TCP
// server turns back into the same codes.
var exceptions = map[byte]mb.Error{
	1: mb.ErrIllegalFunction, 2: mb.ErrIllegalDataAddress, 3: mb.ErrIllegalDataValue,
	4: mb.ErrServerDeviceFailure, 5: mb.ErrAcknowledge, 6: mb.ErrServerDeviceBusy,
	8: mb.ErrMemoryParityError, 10: mb.ErrGWPathUnavailable, 11: mb.ErrGWTargetFailedToRespond,
}

// exceptionError returns the library error for code.
func exceptionError(code byte) error {
	if e, ok := exceptions[code]; ok {
		return e
	}
	return mb.ErrServerDeviceFailure
}

// exceptionCode is exceptionError's inverse (server device failure for an
// error that is none of them).
func exceptionCode(err error) byte {
	for c, e := range exceptions {
		if errors.Is(err, e) {
			return c
		}
	}
	return 4
}

func (p *PLC) inRange(addr, n int) bool { return n > 0 && addr >= 0 && addr+n <= p.cfg.Size }

// readBits reads n coils (or discrete inputs) from addr.
func (p *PLC) readBits(addr, n int, discrete bool) ([]bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.inRange(addr, n) {
		return nil, errAddress
	}
	t := p.coils
	if discrete {
		t = p.discrete
	}
	return append([]bool(nil), t[addr:addr+n]...), nil
}

// writeCoils sets coils from addr.
func (p *PLC) writeCoils(addr int, v []bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.inRange(addr, len(v)) {
		return errAddress
	}
	copy(p.coils[addr:], v)
	w := Write{Table: "coil", Addr: uint16(addr), Values: make([]uint16, len(v))}
	for i, on := range v {
		if on {
			w.Values[i] = 1
		}
	}
	p.applied(w)
	return nil
}

func (p *PLC) applied(w Write) {
	p.log = append(p.log, w)
	p.stats.Writes++
}

// readRegs reads n holding (or input) registers from addr.
func (p *PLC) readRegs(addr, n int, input bool) ([]uint16, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.inRange(addr, n) {
		return nil, errAddress
	}
	t := p.holding
	if input {
		t = p.input
	}
	return append([]uint16(nil), t[addr:addr+n]...), nil
}

// writeRegs sets holding registers from addr. A write that touches the
// fence block (exception mode) must hold all of it and a position at or
// above the highest; otherwise none of it is applied.
func (p *PLC) writeRegs(addr int, v []uint16) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.inRange(addr, len(v)) {
		return errAddress
	}
	for _, r := range p.cfg.Protected {
		if r.overlaps(addr, len(v)) {
			return errAddress
		}
	}
	if err := p.checkFence(addr, v); err != nil {
		return err
	}
	copy(p.holding[addr:], v)
	p.applied(Write{Table: "holding", Addr: uint16(addr), Values: append([]uint16(nil), v...)})
	return nil
}

// checkFence is the exception-mode fence (the mutex is held).
func (p *PLC) checkFence(addr int, v []uint16) error {
	f := p.cfg.Fence
	if f == nil || f.Status {
		return nil
	}
	start, end := int(f.Address), int(f.Address)+f.Words
	switch {
	case addr >= end || addr+len(v) <= start:
		return nil
	case addr > start || addr+len(v) < end:
		return mb.ErrIllegalDataValue // part of the block: never a position
	}
	block := v[start-addr : end-addr]
	if compareWords(block, p.highest) < 0 {
		p.stats.Stale++
		return exceptionError(f.Exception)
	}
	if err := p.raise(block); err != nil {
		return mb.ErrServerDeviceFailure
	}
	return nil
}
