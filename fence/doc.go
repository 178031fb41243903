// Package fence defines fencegate's fencing tokens: what a token names, how it
// is encoded and signed, and how two tokens order.
//
// A token names one lease of one fencing domain: (domain, epoch, seq), plus
// the holder, the issue time, the TTL and the id of the key that signed it.
// Within a domain tokens order lexicographically by (epoch, seq); tokens of
// different domains never compare (Compare returns ErrDomainMismatch).
//
// The wire form is
//
//	fg1.<base64url(body)>.<base64url(signature)>
//
// unpadded, where body is the fixed binary layout documented in
// docs/protocol.md and the signature is Ed25519 over SignaturePrefix+body.
// Only a holder of a controller private key can mint a token (a Signer); an
// agent verifies tokens against a KeyRing of trusted public keys, which caches
// successful verifications so a stream of commands under one lease pays for
// one signature check.
//
// The package imports nothing else of fencegate but the leaf file utility
// internal/atomicfile.
package fence
