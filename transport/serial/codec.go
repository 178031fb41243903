package serial

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Msg is one decoded message, or a report of garbage: exactly one of Data
// (a line without its terminator, or a frame's payload) and Err is set;
// Err wraps ErrGarbage or ErrBadFrame and Data may then hold the bytes.
type Msg struct {
	Data []byte
	Err  error
}

// Decoder turns bytes read from a port into messages. It is used by one
// goroutine at a time; Link serializes Feed and Reset.
type Decoder interface {
	// Feed decodes b, calling emit for each complete message or garbage
	// report, in order. It keeps an incomplete message for the next Feed;
	// emit must not retain b.
	Feed(b []byte, emit func(Msg))
	// Reset drops an incomplete message.
	Reset()
}

// castagnoli is the CRC-32C table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC-32C (Castagnoli) of b.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// EncodeFrame returns payload framed for the wire:
// 0x00, COBS(payload ‖ CRC-32C(payload) big-endian), 0x00. The leading
// delimiter lets a receiver resynchronize after noise.
func EncodeFrame(payload []byte) []byte {
	body := binary.BigEndian.AppendUint32(append([]byte(nil), payload...), CRC32C(payload))
	out := COBSEncode([]byte{0}, body)
	return append(out, 0)
}

// CutGuard returns the byte to send ahead of the next frame when the frame
// sent last (f, as EncodeFrame returned it) may have been cut short on the
// wire — a timeout or a partial write, after which the unsent rest was
// discarded. Whatever prefix of f reached the receiver, that prefix, this
// byte and the next frame's leading 0x00 never make a valid frame: a prefix
// of the COBS data plus one byte is an encoding of f's payload and CRC only
// if the byte equals one of f's last two COBS bytes (CutGuard picks one of
// 0x01..0x03 that does not), and any other result is a strict prefix of a
// message, a message with a trailing byte, or a CRC that differs in one
// byte — refused by a receiver that checks COBS, CRC-32C and the message's
// lengths. With no cut prefix the byte is a frame too short for a CRC,
// which the receiver drops.
func CutGuard(f []byte) byte {
	body := bytes.Trim(f, "\x00")
	tail := body[max(0, len(body)-2):]
	g := byte(1)
	for bytes.IndexByte(tail, g) >= 0 {
		g++
	}
	return g
}

// DecodeFrame decodes the bytes between two delimiters: COBS, then the
// trailing CRC-32C. Errors wrap ErrBadFrame.
func DecodeFrame(raw []byte) ([]byte, error) {
	body, err := COBSDecode(raw)
	if err != nil {
		return nil, err
	}
	if len(body) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, shorter than a CRC", ErrBadFrame, len(body))
	}
	payload, sum := body[:len(body)-4], binary.BigEndian.Uint32(body[len(body)-4:])
	if got := CRC32C(payload); got != sum {
		return nil, fmt.Errorf("%w: CRC-32C %08x, frame says %08x", ErrBadFrame, got, sum)
	}
	return payload, nil
}

// FrameDecoder splits input at 0x00 delimiters and decodes each frame.
// Empty frames (two delimiters in a row) are skipped; frames longer than
// max encoded bytes, bad COBS and CRC mismatches are reported.
type FrameDecoder struct {
	max      int
	buf      []byte
	overlong bool
}

// NewFrameDecoder returns a decoder for frames of at most max encoded bytes.
func NewFrameDecoder(max int) *FrameDecoder { return &FrameDecoder{max: max} }

// Feed implements Decoder.
func (d *FrameDecoder) Feed(b []byte, emit func(Msg)) {
	d.split(b, 0, func(raw []byte) { frame(raw, emit) }, func() {
		emit(Msg{Err: fmt.Errorf("%w: longer than %d bytes", ErrBadFrame, d.max)})
	})
}

// split feeds b into the buffer, calling whole for each non-empty part
// ended by sep, or overlong for a part longer than d.max.
func (d *FrameDecoder) split(b []byte, sep byte, whole func([]byte), overlong func()) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, sep)
		if i < 0 {
			d.keep(b)
			return
		}
		d.keep(b[:i])
		if d.overlong {
			overlong()
		} else if len(d.buf) > 0 {
			whole(d.buf)
		}
		d.Reset()
		b = b[i+1:]
	}
}

func (d *FrameDecoder) keep(b []byte) {
	if d.overlong || len(d.buf)+len(b) > d.max {
		d.overlong, d.buf = true, d.buf[:0]
		return
	}
	d.buf = append(d.buf, b...)
}

func frame(raw []byte, emit func(Msg)) {
	p, err := DecodeFrame(raw)
	if err != nil {
		emit(Msg{Data: bytes.Clone(raw), Err: err})
		return
	}
	emit(Msg{Data: bytes.Clone(p)})
}

// Reset implements Decoder.
func (d *FrameDecoder) Reset() { d.buf, d.overlong = d.buf[:0], false }

// LineDecoder splits input into lines ended by '\n', dropping a '\r' before
// it. Empty lines are skipped. A line longer than max bytes, or holding
// control bytes other than tab, is reported as garbage (ErrGarbage).
type LineDecoder struct{ fd FrameDecoder }

// NewLineDecoder returns a decoder for lines of at most max bytes.
func NewLineDecoder(max int) *LineDecoder { return &LineDecoder{fd: FrameDecoder{max: max + 1}} }

// Feed implements Decoder.
func (d *LineDecoder) Feed(b []byte, emit func(Msg)) {
	d.fd.split(b, '\n', func(raw []byte) { line(raw, emit) }, func() {
		emit(Msg{Err: fmt.Errorf("%w: line longer than %d bytes", ErrGarbage, d.fd.max-1)})
	})
}

func line(raw []byte, emit func(Msg)) {
	l := bytes.Clone(bytes.TrimSuffix(raw, []byte{'\r'}))
	if i := bytes.IndexFunc(l, isControl); i >= 0 {
		emit(Msg{Data: l, Err: fmt.Errorf("%w: control byte %#02x in line %q", ErrGarbage, l[i], Truncate(l, 64))})
		return
	}
	if len(l) > 0 {
		emit(Msg{Data: l})
	}
}

func isControl(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }

// Reset implements Decoder.
func (d *LineDecoder) Reset() { d.fd.Reset() }

// Truncate returns at most n bytes of b, for error messages.
func Truncate(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return b[:n]
}
