//go:build race

package vectors

// randomInputs is smaller under the race detector, which slows Go's
// Ed25519 verification about tenfold.
const randomInputs = 4000
