//go:build !race

package vectors

// randomInputs is how many random changes TestCDifferentialRandomChanges
// checks.
const randomInputs = 20000
