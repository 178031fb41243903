// Package archtest holds the tests that keep fencegate's architecture as
// docs/architecture.md writes it down: the import direction between layers
// (DESIGN §8), one error-wrapping rule (%w for every wrapped error) and one
// shared test kit instead of helpers copied from package to package.
//
// The package has no code of its own; its tests read the module with
// `go list` and go/parser, so they run from any checkout that has the go
// tool, and skip saying so where it is absent.
package archtest
