package vectors

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fence/fencetest"
)

// rawBody is a body laid out field by field, to build bodies the Signer
// refuses to (zero fields, bad ids, wrong versions). It is the vectors'
// own encoder of the layout in docs/protocol.md; TestBuilderMatchesSigner
// checks it against the Signer's for valid tokens.
type rawBody struct {
	version        byte
	keyID          fence.KeyID
	epoch, seq     uint64
	issuedAt       int64
	ttl            uint32
	domain, holder string
}

// bodyOf is the raw body of a token.
func bodyOf(t fence.Token) rawBody {
	return rawBody{version: fence.BodyVersion, keyID: t.KeyID, epoch: t.Epoch, seq: t.Seq,
		issuedAt: t.IssuedAt, ttl: t.TTLms, domain: t.Domain, holder: t.Holder}
}

func (r rawBody) bytes() []byte {
	b := []byte{r.version}
	b = append(b, r.keyID[:]...)
	b = binary.BigEndian.AppendUint64(b, r.epoch)
	b = binary.BigEndian.AppendUint64(b, r.seq)
	b = binary.BigEndian.AppendUint64(b, uint64(r.issuedAt))
	b = binary.BigEndian.AppendUint32(b, r.ttl)
	b = append(b, byte(len(r.domain)))
	b = append(b, r.domain...)
	b = append(b, byte(len(r.holder)))
	return append(b, r.holder...)
}

var b64 = base64.RawURLEncoding

// wireOf is the wire form of any body and signature bytes.
func wireOf(body, sig []byte) string {
	return fence.WirePrefix + b64.EncodeToString(body) + "." + b64.EncodeToString(sig)
}

// signBody signs arbitrary body bytes with the key of seed, as a
// controller would sign a valid body.
func signBody(seed byte, body []byte) []byte {
	msg := append([]byte(fence.SignaturePrefix), body...)
	return ed25519.Sign(fencetest.Key(seed), msg)
}

// signed is the wire form of body signed by seed.
func signed(seed byte, body []byte) string { return wireOf(body, signBody(seed, body)) }

// groupOrder is L, the order of the Ed25519 base point, little-endian as
// S is encoded.
var groupOrder = [32]byte{
	0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
}

// nonCanonical returns sig with S replaced by S + L: the same point
// equation holds, but S >= L, which verifiers must reject.
func nonCanonical(sig []byte) []byte {
	out := append([]byte(nil), sig...)
	carry := 0
	for i := 0; i < 32; i++ {
		v := int(out[32+i]) + int(groupOrder[i]) + carry
		out[32+i] = byte(v)
		carry = v >> 8
	}
	return out
}

// ed25519SignRaw signs body with key 0 without the signature prefix: a
// signature of the right key over the wrong message.
func ed25519SignRaw(body []byte) []byte { return ed25519.Sign(fencetest.Key(0), body) }
