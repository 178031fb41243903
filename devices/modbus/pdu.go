package modbus

import (
	"encoding/binary"
	"fmt"
)

// Function codes the driver sends (Modbus Application Protocol v1.1b3 §6).
const (
	FuncReadCoils          byte = 0x01
	FuncReadDiscreteInputs byte = 0x02
	FuncReadHolding        byte = 0x03
	FuncReadInput          byte = 0x04
	FuncWriteCoil          byte = 0x05
	FuncWriteRegister      byte = 0x06
	FuncWriteCoils         byte = 0x0F
	FuncWriteRegisters     byte = 0x10
)

// Request size limits of the Modbus specification.
const (
	MaxReadBits       = 2000
	MaxReadRegisters  = 125
	MaxWriteCoils     = 1968
	MaxWriteRegisters = 123
)

// PDU is a Modbus protocol data unit: a function code and its data, the
// part common to RTU and TCP framing.
type PDU struct {
	Function byte
	Data     []byte
}

// ExceptionError is a Modbus exception response: the device understood the
// request and refused it.
type ExceptionError struct {
	Function byte // the request's function code
	Code     byte // the exception code
}

// exceptionNames are the exception codes of the specification (§7).
var exceptionNames = map[byte]string{
	1: "illegal function", 2: "illegal data address", 3: "illegal data value",
	4: "server device failure", 5: "acknowledge", 6: "server device busy",
	8: "memory parity error", 10: "gateway path unavailable",
	11: "gateway target device failed to respond",
}

// Name is the exception's name in the specification, or "exception N".
func (e *ExceptionError) Name() string {
	if n, ok := exceptionNames[e.Code]; ok {
		return n
	}
	return fmt.Sprintf("exception %d", e.Code)
}

// MayHaveActed reports whether the server may have carried the request out
// despite the exception: server device failure (4, perhaps partly),
// acknowledge (5: accepted, still executing) and gateway target failed to
// respond (11: forwarded, no answer). The others refuse the request.
func (e *ExceptionError) MayHaveActed() bool { return e.Code == 4 || e.Code == 5 || e.Code == 11 }

func (e *ExceptionError) Error() string {
	return fmt.Sprintf("modbus exception %d (%s) to function %#02x", e.Code, e.Name(), e.Function)
}

// readRequest asks for qty items of a table from addr.
func readRequest(fn byte, addr, qty uint16) PDU {
	return PDU{Function: fn, Data: binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, addr), qty)}
}

// writeCoilRequest is FC 05: 0xFF00 for on, 0x0000 for off.
func writeCoilRequest(addr uint16, on bool) PDU {
	v := uint16(0)
	if on {
		v = 0xFF00
	}
	return PDU{Function: FuncWriteCoil, Data: binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, addr), v)}
}

// writeRegisterRequest is FC 06.
func writeRegisterRequest(addr, v uint16) PDU {
	return PDU{Function: FuncWriteRegister, Data: binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, addr), v)}
}

// writeCoilsRequest is FC 15: bits packed least significant first.
func writeCoilsRequest(addr uint16, bits []bool) PDU {
	packed := PackBits(bits)
	d := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, addr), uint16(len(bits)))
	return PDU{Function: FuncWriteCoils, Data: append(append(d, byte(len(packed))), packed...)}
}

// writeRegistersRequest is FC 16.
func writeRegistersRequest(addr uint16, words []uint16) PDU {
	d := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, addr), uint16(len(words)))
	d = append(d, byte(2*len(words)))
	for _, w := range words {
		d = binary.BigEndian.AppendUint16(d, w)
	}
	return PDU{Function: FuncWriteRegisters, Data: d}
}

// PackBits packs bits least significant bit first, as coils travel.
func PackBits(bits []bool) []byte {
	out := make([]byte, (len(bits)+7)/8)
	for i, b := range bits {
		if b {
			out[i/8] |= 1 << (i % 8)
		}
	}
	return out
}

// UnpackBits returns the first n bits of packed.
func UnpackBits(packed []byte, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = packed[i/8]&(1<<(i%8)) != 0
	}
	return out
}

// protocolError is a response that does not answer its request (another
// function, a wrong length, a write echo that differs).
type protocolError struct{ why string }

func (e *protocolError) Error() string {
	return "modbus: response does not answer the request: " + e.why
}

func mismatch(format string, args ...any) error {
	return &protocolError{why: fmt.Sprintf(format, args...)}
}

// checkException returns the exception res carries, a protocol error if
// res is for another function, or nil.
func checkException(req, res PDU) error {
	switch res.Function {
	case req.Function:
		return nil
	case req.Function | 0x80:
		if len(res.Data) != 1 {
			return mismatch("exception response of %d bytes", len(res.Data))
		}
		return &ExceptionError{Function: req.Function, Code: res.Data[0]}
	}
	return mismatch("function %#02x answers function %#02x", res.Function, req.Function)
}

// parseBits returns the bits of a FC 01/02 response to req.
func parseBits(req, res PDU) ([]bool, error) {
	if err := checkException(req, res); err != nil {
		return nil, err
	}
	qty := int(binary.BigEndian.Uint16(req.Data[2:]))
	if len(res.Data) < 1 || int(res.Data[0]) != (qty+7)/8 || len(res.Data) != 1+int(res.Data[0]) {
		return nil, mismatch("%d data bytes for %d bits", len(res.Data), qty)
	}
	return UnpackBits(res.Data[1:], qty), nil
}

// parseRegisters returns the words of a FC 03/04 response to req.
func parseRegisters(req, res PDU) ([]uint16, error) {
	if err := checkException(req, res); err != nil {
		return nil, err
	}
	qty := int(binary.BigEndian.Uint16(req.Data[2:]))
	if len(res.Data) < 1 || int(res.Data[0]) != 2*qty || len(res.Data) != 1+2*qty {
		return nil, mismatch("%d data bytes for %d registers", len(res.Data), qty)
	}
	words := make([]uint16, qty)
	for i := range words {
		words[i] = binary.BigEndian.Uint16(res.Data[1+2*i:])
	}
	return words, nil
}

// checkWriteEcho checks a FC 05/06/15/16 response: it echoes the
// request's first four data bytes (address and value, or address and
// quantity).
func checkWriteEcho(req, res PDU) error {
	if err := checkException(req, res); err != nil {
		return err
	}
	if len(res.Data) != 4 || string(res.Data) != string(req.Data[:4]) {
		return mismatch("write echo % x, request % x", res.Data, req.Data[:4])
	}
	return nil
}
