package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Protocol v1 constants (docs/firmware-protocol.md).
const (
	Version     byte = 1
	TypeCommand byte = 0x01
	TypeReply   byte = 0x81
	// MaxPayload bounds a message before framing (COBS, CRC).
	MaxPayload = 1024
	// MaxEncoded bounds a frame's encoded bytes between delimiters.
	MaxEncoded = MaxPayload + MaxPayload/254 + 1 + 4 + 1
)

// Status is a reply's outcome.
type Status byte

// Reply statuses.
const (
	StatusApplied    Status = 0 // Body: output, a JSON object, or empty
	StatusError      Status = 1 // Body: the device's error message
	StatusStale      Status = 2 // Epoch, Seq, Holder: the firmware's fence
	StatusUnknownOp  Status = 3 // Body: optional message
	StatusBadRequest Status = 4 // Body: what the firmware could not parse
)

// ErrMalformed: a message does not follow the protocol's layout.
var ErrMalformed = errors.New("frame: malformed message")

// Request is a command for the firmware.
type Request struct {
	ID, Domain string
	Epoch, Seq uint64
	Holder, Op string
	Args       []byte // JSON object text, or empty
}

// Reply is the firmware's answer to the Request with the same ID.
type Reply struct {
	ID         string
	Status     Status
	Epoch, Seq uint64 // the firmware's fence for the request's domain
	Holder     string
	Body       []byte
}

// Marshal encodes r: version, type, id, domain, epoch, seq, holder, op
// (strings with a 1-byte length), args (2-byte length); integers big-endian.
func (r Request) Marshal() ([]byte, error) {
	b := []byte{Version, TypeCommand}
	b = appendStr8(b, r.ID)
	b = appendStr8(b, r.Domain)
	b = binary.BigEndian.AppendUint64(b, r.Epoch)
	b = binary.BigEndian.AppendUint64(b, r.Seq)
	b = appendStr8(b, r.Holder)
	b = appendStr8(b, r.Op)
	b = appendBytes16(b, r.Args)
	return b, checkSize(b, r.ID, r.Domain, r.Holder, r.Op)
}

// Marshal encodes r: version, type, id, status, epoch, seq, holder, body.
func (r Reply) Marshal() ([]byte, error) {
	b := []byte{Version, TypeReply}
	b = appendStr8(b, r.ID)
	b = append(b, byte(r.Status))
	b = binary.BigEndian.AppendUint64(b, r.Epoch)
	b = binary.BigEndian.AppendUint64(b, r.Seq)
	b = appendStr8(b, r.Holder)
	b = appendBytes16(b, r.Body)
	return b, checkSize(b, r.ID, r.Holder)
}

func checkSize(b []byte, strs ...string) error {
	for _, s := range strs {
		if len(s) > 255 {
			return fmt.Errorf("%w: string of %d bytes (max 255)", ErrMalformed, len(s))
		}
	}
	if len(b) > MaxPayload {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(b), MaxPayload)
	}
	return nil
}

func appendStr8(b []byte, s string) []byte {
	return append(append(b, byte(len(s))), s...)
}

func appendBytes16(b, p []byte) []byte {
	return append(binary.BigEndian.AppendUint16(b, uint16(len(p))), p...)
}

// ParseRequest decodes a command message; it fails on a wrong version or
// type, a field running past the end, or trailing bytes.
func ParseRequest(b []byte) (Request, error) {
	d := decoder{b: b}
	d.header(TypeCommand)
	r := Request{ID: d.str8(), Domain: d.str8(), Epoch: d.u64(), Seq: d.u64(), Holder: d.str8(), Op: d.str8(), Args: d.bytes16()}
	return r, d.finish()
}

// ParseReply decodes a reply message, with the same checks as ParseRequest
// and a known status.
func ParseReply(b []byte) (Reply, error) {
	d := decoder{b: b}
	d.header(TypeReply)
	r := Reply{ID: d.str8(), Status: Status(d.u8()), Epoch: d.u64(), Seq: d.u64(), Holder: d.str8(), Body: d.bytes16()}
	if d.err == nil && r.Status > StatusBadRequest {
		d.err = fmt.Errorf("%w: unknown status %d", ErrMalformed, r.Status)
	}
	return r, d.finish()
}

// decoder reads fields in order; after the first error every read returns
// zero and the error stays.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.err = fmt.Errorf("%w: %s runs past the end", ErrMalformed, what)
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8() byte {
	if p := d.take(1, "byte"); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.take(8, "integer"); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) str8() string { return string(d.take(int(d.u8()), "string")) }

func (d *decoder) bytes16() []byte {
	n := d.take(2, "length")
	if n == nil {
		return nil
	}
	return append([]byte(nil), d.take(int(binary.BigEndian.Uint16(n)), "body")...)
}

func (d *decoder) header(typ byte) {
	if v := d.u8(); d.err == nil && v != Version {
		d.err = fmt.Errorf("%w: version %d, want %d", ErrMalformed, v, Version)
	}
	if t := d.u8(); d.err == nil && t != typ {
		d.err = fmt.Errorf("%w: type %#02x, want %#02x", ErrMalformed, t, typ)
	}
}

func (d *decoder) finish() error {
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.b))
	}
	return d.err
}
