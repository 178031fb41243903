// Package vectors writes the test vectors that hold the C library of
// firmware/c to the answers of the Go implementation (package fence): valid
// tokens with their fields, tokens for every rejection reason of
// docs/protocol.md, every single-byte substitution, deletion and truncation
// of valid tokens, positions and token pairs to compare, and fence
// transitions. Every expected answer is what fence.ParseUnverified,
// KeyRing.Verify, ComparePosition, Token.Compare and Token.SameLease return
// for the same input; the generator computes none of them itself.
//
// The output is deterministic (fixed seeds, Ed25519 is deterministic), so
// the files committed in firmware/c/testdata can be regenerated and compared
// byte for byte: TestVectorsUpToDate does that, and
//
//	go generate ./firmware/vectors
//
// rewrites them. The file formats are described in firmware/c/testdata/README.md.
//
// The package imports only fence and the fence test kit.
package vectors

//go:generate go test -run TestVectorsUpToDate -update .
