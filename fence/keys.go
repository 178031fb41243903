package fence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// KeyIDLen is the length of a key id in bytes.
const KeyIDLen = 8

// KeyID names a controller signing key: the first KeyIDLen bytes of the
// SHA-256 of its 32-byte Ed25519 public key. Its text form is 16 hex digits.
type KeyID [KeyIDLen]byte

// KeyIDOf returns the id of a public key.
func KeyIDOf(pub ed25519.PublicKey) KeyID {
	sum := sha256.Sum256(pub)
	var id KeyID
	copy(id[:], sum[:KeyIDLen])
	return id
}

// String returns the id as lower-case hex.
func (id KeyID) String() string { return hex.EncodeToString(id[:]) }

// ParseKeyID reads the hex form of a key id.
func ParseKeyID(s string) (KeyID, error) {
	var id KeyID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != KeyIDLen {
		return id, fmt.Errorf("fence: key id %q is not %d hex digits", s, 2*KeyIDLen)
	}
	copy(id[:], b)
	return id, nil
}

// Signer mints tokens with one Ed25519 private key. It is safe for
// concurrent use. Only the lease controller holds a Signer.
type Signer struct {
	priv ed25519.PrivateKey
	id   KeyID
}

// NewSigner returns a Signer for priv, which must be a full Ed25519 private key.
func NewSigner(priv ed25519.PrivateKey) (*Signer, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: private key is %d bytes, want %d", ErrKeyFile, len(priv), ed25519.PrivateKeySize)
	}
	// Rebuild from the seed: a key whose stored public half does not match
	// its seed would mint tokens nobody can verify (and leaks the key).
	full := ed25519.NewKeyFromSeed(priv.Seed())
	if !bytes.Equal(full[ed25519.SeedSize:], priv[ed25519.SeedSize:]) {
		return nil, fmt.Errorf("%w: public half does not match the seed", ErrKeyFile)
	}
	return &Signer{priv: full, id: KeyIDOf(full.Public().(ed25519.PublicKey))}, nil
}

// KeyID returns the id of the signing key.
func (s *Signer) KeyID() KeyID { return s.id }

// Public returns the signing key's public half, for agents' key rings.
func (s *Signer) Public() ed25519.PublicKey { return s.priv.Public().(ed25519.PublicKey) }

// Sign validates t, sets its KeyID to the signer's and returns it with Raw
// set to the signed wire form.
func (s *Signer) Sign(t Token) (Token, error) {
	t.KeyID = s.id
	if err := t.Validate(); err != nil {
		return Token{}, fmt.Errorf("sign: %w", err)
	}
	body := encodeBody(t)
	sig := ed25519.Sign(s.priv, signedMessage(body))
	t.Raw = encodeWire(body, sig)
	return t, nil
}

func signedMessage(body []byte) []byte {
	msg := make([]byte, 0, len(SignaturePrefix)+len(body))
	msg = append(msg, SignaturePrefix...)
	return append(msg, body...)
}
