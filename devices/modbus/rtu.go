package modbus

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencegate/fencegate/transport/serial"
)

// MaxADU bounds an RTU frame: address, function, up to 252 data bytes, CRC.
const MaxADU = 256

// CRC16 returns the CRC-16/MODBUS of b (reflected polynomial 0xA001,
// initial value 0xFFFF). It travels after the frame, low byte first.
func CRC16(b []byte) uint16 {
	crc := uint16(0xFFFF)
	for _, c := range b {
		crc ^= uint16(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0xA001
			} else {
				crc >>= 1
			}
		}
	}
	return crc
}

// EncodeRTU returns p as an RTU frame for unit: address, function, data,
// CRC-16 low byte first.
func EncodeRTU(unit byte, p PDU) []byte {
	b := append([]byte{unit, p.Function}, p.Data...)
	crc := CRC16(b)
	return append(b, byte(crc), byte(crc>>8))
}

// SplitRTU splits a decoded frame (as RTUDecoder emits it: address,
// function, data — the CRC already checked and removed) into its unit and
// PDU.
func SplitRTU(frame []byte) (unit byte, p PDU) {
	return frame[0], PDU{Function: frame[1], Data: frame[2:]}
}

// Side says who wrote the frames an RTUDecoder reads. An RTU frame carries
// no length; the length follows from the function code, differently for a
// client's requests and a server's responses.
type Side int

const (
	// Responses are what a server (the device) sends: what a driver reads.
	Responses Side = iota
	// Requests are what a client sends: what a simulated device reads.
	Requests
)

// errNotFrame: the bytes at the decoder's position cannot start a frame.
var errNotFrame = errors.New("not a frame start")

// frameLen returns the length, CRC included, of the frame starting b, 0 if
// more bytes are needed to know, or errNotFrame.
func frameLen(side Side, b []byte) (int, error) {
	if len(b) < 2 {
		return 0, nil
	}
	if side == Requests {
		return requestLen(b)
	}
	return responseLen(b)
}

func responseLen(b []byte) (int, error) {
	fn := b[1]
	if fn&0x80 != 0 {
		if !knownFunction(fn &^ 0x80) {
			return 0, errNotFrame
		}
		return 5, nil
	}
	switch fn {
	case FuncReadCoils, FuncReadDiscreteInputs, FuncReadHolding, FuncReadInput:
		if len(b) < 3 {
			return 0, nil
		}
		n := int(b[2])
		if n == 0 || n > 250 || (fn == FuncReadHolding || fn == FuncReadInput) && n%2 != 0 {
			return 0, errNotFrame
		}
		return 5 + n, nil
	case FuncWriteCoil, FuncWriteRegister, FuncWriteCoils, FuncWriteRegisters:
		return 8, nil
	}
	return 0, errNotFrame
}

func requestLen(b []byte) (int, error) {
	switch fn := b[1]; fn {
	case FuncReadCoils, FuncReadDiscreteInputs, FuncReadHolding, FuncReadInput, FuncWriteCoil, FuncWriteRegister:
		return 8, nil
	case FuncWriteCoils, FuncWriteRegisters:
		if len(b) < 7 {
			return 0, nil
		}
		if b[6] == 0 || int(b[6]) > MaxADU-9 {
			return 0, errNotFrame
		}
		return 9 + int(b[6]), nil
	}
	return 0, errNotFrame
}

func knownFunction(fn byte) bool {
	switch fn {
	case FuncReadCoils, FuncReadDiscreteInputs, FuncReadHolding, FuncReadInput,
		FuncWriteCoil, FuncWriteRegister, FuncWriteCoils, FuncWriteRegisters:
		return true
	}
	return false
}

// RTUDecoder is the RTU frame reader: it implements serial.Decoder,
// cutting a byte stream into frames by their function code's length and
// checking each frame's CRC. A frame is emitted as address, function and
// data (CRC removed). Bytes that start no valid frame are skipped one at a
// time — so a frame after noise is still found — and reported as one
// garbage message (serial.ErrBadFrame) per run. An incomplete frame
// followed by more than gap of silence is dropped and reported (a frame
// never pauses that long in the middle); gap 0 disables that.
//
// Feed and Reset are called by one goroutine at a time (serial.Link
// serializes them); LastInput may be called from any goroutine.
type RTUDecoder struct {
	side    Side
	gap     time.Duration
	now     func() time.Time
	buf     []byte
	skipped []byte // garbage skipped since the last report (first bytes)
	nskip   int

	mu   sync.Mutex // guards last
	last time.Time  // when bytes last arrived
}

// NewRTUDecoder returns a decoder for frames written by side.
func NewRTUDecoder(side Side, gap time.Duration) *RTUDecoder {
	return &RTUDecoder{side: side, gap: gap, now: time.Now}
}

// LastInput is when Feed was last given bytes (zero before any).
func (d *RTUDecoder) LastInput() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

// Feed implements serial.Decoder.
func (d *RTUDecoder) Feed(b []byte, emit func(serial.Msg)) {
	if len(b) == 0 {
		return
	}
	now := d.now()
	d.mu.Lock()
	prev := d.last
	d.last = now
	d.mu.Unlock()
	if len(d.buf) > 0 && d.gap > 0 && now.Sub(prev) > d.gap {
		d.skip(len(d.buf))
		d.report(emit, "incomplete frame ended by silence")
	}
	d.buf = append(d.buf, b...)
	d.scan(emit)
}

// scan emits every complete frame in the buffer, skipping garbage. When
// the bytes at the front could still become a frame but are incomplete, a
// complete valid frame further on means they were garbage (a header whose
// length field is noise would otherwise hold the real frame back).
func (d *RTUDecoder) scan(emit func(serial.Msg)) {
	for len(d.buf) > 0 {
		n, err := frameLen(d.side, d.buf)
		switch {
		case err != nil:
			d.skip(1)
		case n == 0 || len(d.buf) < n:
			i := d.later()
			if i == 0 {
				d.report(emit, "bytes that start no frame")
				return
			}
			d.skip(i)
		case validCRC(d.buf[:n]):
			d.report(emit, "bytes that start no frame")
			emit(serial.Msg{Data: bytes.Clone(d.buf[:n-2])})
			d.buf = d.buf[n:]
		default:
			d.skip(1)
		}
	}
	d.report(emit, "bytes that start no frame")
}

// later returns the offset of the first complete, valid frame after the
// buffer's front, or 0.
func (d *RTUDecoder) later() int {
	for i := 1; i+4 <= len(d.buf); i++ {
		n, err := frameLen(d.side, d.buf[i:])
		if err == nil && n > 0 && i+n <= len(d.buf) && validCRC(d.buf[i:i+n]) {
			return i
		}
	}
	return 0
}

// validCRC checks the CRC at the end of a frame.
func validCRC(f []byte) bool {
	n := len(f)
	return CRC16(f[:n-2]) == uint16(f[n-2])|uint16(f[n-1])<<8
}

// skip drops n bytes from the buffer's front, keeping the first ones for
// the next report.
func (d *RTUDecoder) skip(n int) {
	if len(d.skipped) < 32 {
		d.skipped = append(d.skipped, d.buf[:min(n, 32-len(d.skipped))]...)
	}
	d.nskip += n
	d.buf = d.buf[n:]
}

// report emits the garbage skipped since the last report, if any.
func (d *RTUDecoder) report(emit func(serial.Msg), what string) {
	if d.nskip == 0 {
		return
	}
	emit(serial.Msg{Data: bytes.Clone(d.skipped), Err: fmt.Errorf("%w: %d %s", serial.ErrBadFrame, d.nskip, what)})
	d.skipped, d.nskip = d.skipped[:0], 0
}

// Reset implements serial.Decoder: it drops an incomplete frame and
// unreported garbage.
func (d *RTUDecoder) Reset() {
	d.buf, d.skipped, d.nskip = d.buf[:0], d.skipped[:0], 0
}

// CharTime is how long one character takes on the line: a start bit, the
// data bits, a parity bit unless parity is "none", the stop bits.
func CharTime(baud, dataBits int, parity, stopBits string) time.Duration {
	bits := 1.0 + float64(dataBits) + map[string]float64{"1": 1, "1.5": 1.5, "2": 2}[stopBits]
	if parity != "none" {
		bits++
	}
	return time.Duration(bits * float64(time.Second) / float64(baud))
}

// InterFrame is the silence that separates RTU frames (t3.5 of the Modbus
// serial line specification §2.5.1.1): 3.5 character times, and a fixed
// 1.75 ms above 19200 baud.
func InterFrame(baud int, char time.Duration) time.Duration {
	if baud > 19200 {
		return 1750 * time.Microsecond
	}
	return char * 7 / 2
}
