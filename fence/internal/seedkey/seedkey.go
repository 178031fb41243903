// Package seedkey derives deterministic Ed25519 test keys from one seed
// byte. It imports nothing of ours, so both fence's internal tests and
// fence/fencetest (which imports fence) can share it.
package seedkey

import "crypto/ed25519"

// Seed returns the 32-byte Ed25519 seed whose bytes are first, first+1,
// …, first+31 (wrapping). Seed(0) is the key of the worked example in
// docs/protocol.md.
func Seed(first byte) []byte {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = first + byte(i)
	}
	return seed
}

// Key returns the private key derived from Seed(first).
func Key(first byte) ed25519.PrivateKey { return ed25519.NewKeyFromSeed(Seed(first)) }
