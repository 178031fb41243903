package fence

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
)

// Wire format constants; docs/protocol.md describes the layout byte by byte.
const (
	// WirePrefix starts every token's wire form.
	WirePrefix = "fg1."
	// BodyVersion is the first byte of a version 1 body.
	BodyVersion = 0x01
	// SignaturePrefix is prepended to the body before signing (domain
	// separation: a fencegate signature can never be valid for another use).
	SignaturePrefix = "fencegate token v1\x00"
	// MaxTokenLen is the longest accepted wire form, in bytes.
	MaxTokenLen = 1024
	// SignatureLen is the length of an Ed25519 signature.
	SignatureLen = 64

	fixedHead = 1 + KeyIDLen + 8 + 8 + 8 + 4 // version .. ttl_ms
)

var b64 = base64.RawURLEncoding

// encodeBody returns the version 1 body of t. t must be valid.
func encodeBody(t Token) []byte {
	b := make([]byte, 0, fixedHead+2+len(t.Domain)+len(t.Holder))
	b = append(b, BodyVersion)
	b = append(b, t.KeyID[:]...)
	b = binary.BigEndian.AppendUint64(b, t.Epoch)
	b = binary.BigEndian.AppendUint64(b, t.Seq)
	b = binary.BigEndian.AppendUint64(b, uint64(t.IssuedAt))
	b = binary.BigEndian.AppendUint32(b, t.TTLms)
	b = appendString(b, t.Domain)
	return appendString(b, t.Holder)
}

func appendString(b []byte, s string) []byte {
	b = append(b, byte(len(s)))
	return append(b, s...)
}

// decodeBody parses a version 1 body and validates its fields.
func decodeBody(b []byte) (Token, error) {
	if len(b) < 1 {
		return Token{}, fmt.Errorf("%w: empty body", ErrTruncated)
	}
	if b[0] != BodyVersion {
		return Token{}, fmt.Errorf("%w: 0x%02x", ErrVersion, b[0])
	}
	if len(b) < fixedHead {
		return Token{}, fmt.Errorf("%w: body is %d bytes, header needs %d", ErrTruncated, len(b), fixedHead)
	}
	var t Token
	copy(t.KeyID[:], b[1:1+KeyIDLen])
	p := b[1+KeyIDLen:]
	t.Epoch = binary.BigEndian.Uint64(p[0:8])
	t.Seq = binary.BigEndian.Uint64(p[8:16])
	t.IssuedAt = int64(binary.BigEndian.Uint64(p[16:24]))
	t.TTLms = binary.BigEndian.Uint32(p[24:28])
	rest := b[fixedHead:]
	var err error
	if t.Domain, rest, err = readString(rest, "domain"); err != nil {
		return Token{}, err
	}
	if t.Holder, rest, err = readString(rest, "holder"); err != nil {
		return Token{}, err
	}
	if len(rest) != 0 {
		return Token{}, fmt.Errorf("%w: %d bytes after holder", ErrTrailing, len(rest))
	}
	return t, t.Validate()
}

func readString(b []byte, what string) (string, []byte, error) {
	if len(b) < 1 {
		return "", nil, fmt.Errorf("%w: missing %s length", ErrTruncated, what)
	}
	n := int(b[0])
	if len(b)-1 < n {
		return "", nil, fmt.Errorf("%w: %s needs %d bytes, %d left", ErrTruncated, what, n, len(b)-1)
	}
	return string(b[1 : 1+n]), b[1+n:], nil
}

// splitWire checks the envelope of a wire-form token and returns its decoded
// body and signature. It does not look inside the body.
func splitWire(s string) (body, sig []byte, err error) {
	if len(s) > MaxTokenLen {
		return nil, nil, fmt.Errorf("%w: %d bytes, at most %d", ErrOversize, len(s), MaxTokenLen)
	}
	rest, ok := strings.CutPrefix(s, WirePrefix)
	if !ok {
		return nil, nil, ErrPrefix
	}
	if i := indexNotWire(rest); i >= 0 {
		// base64 decoders skip CR and LF; refuse them so one token has one spelling.
		return nil, nil, fmt.Errorf("%w: byte 0x%02x at %d", ErrBase64, rest[i], len(WirePrefix)+i)
	}
	bodyPart, sigPart, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, nil, fmt.Errorf("%w: no signature part", ErrPrefix)
	}
	if body, err = b64.Strict().DecodeString(bodyPart); err != nil {
		return nil, nil, fmt.Errorf("%w: body: %w", ErrBase64, err)
	}
	if sig, err = b64.Strict().DecodeString(sigPart); err != nil {
		return nil, nil, fmt.Errorf("%w: signature: %w", ErrBase64, err)
	}
	switch {
	case len(sig) < SignatureLen:
		return nil, nil, fmt.Errorf("%w: signature is %d bytes", ErrTruncated, len(sig))
	case len(sig) > SignatureLen:
		return nil, nil, fmt.Errorf("%w: signature is %d bytes", ErrTrailing, len(sig))
	}
	return body, sig, nil
}

// ParseUnverified decodes a wire-form token WITHOUT checking its signature.
// It is for reading tokens back from fencegate's own durable stores and for
// diagnostics; a token from the network must go through KeyRing.Verify.
func ParseUnverified(s string) (Token, error) {
	body, _, err := splitWire(s)
	if err != nil {
		return Token{}, err
	}
	t, err := decodeBody(body)
	if err != nil {
		return Token{}, err
	}
	t.Raw = s
	return t, nil
}

func encodeWire(body, sig []byte) string {
	var sb strings.Builder
	sb.Grow(len(WirePrefix) + b64.EncodedLen(len(body)) + 1 + b64.EncodedLen(len(sig)))
	sb.WriteString(WirePrefix)
	sb.WriteString(b64.EncodeToString(body))
	sb.WriteByte('.')
	sb.WriteString(b64.EncodeToString(sig))
	return sb.String()
}

// wireBytes marks the bytes that may occur after the prefix: the base64url
// alphabet and the '.' separator, which together are exactly the id
// alphabet [A-Za-z0-9._-].
var wireBytes = func() (t [256]bool) {
	for c := range 256 {
		t[c] = idByte(byte(c))
	}
	return t
}()

// indexNotWire returns the index of the first byte of s that cannot occur
// after the prefix, or -1 (a byte scan: every token is checked on every
// command, and a rune decode per byte cost more than the rest of parsing).
func indexNotWire(s string) int {
	for i := 0; i < len(s); i++ {
		if !wireBytes[s[i]] {
			return i
		}
	}
	return -1
}
