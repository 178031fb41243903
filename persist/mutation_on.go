//go:build fencegate_mutant_nofence

package persist

// MutantNoFence: see mutation_off.go. This build has the fence comparison off.
const MutantNoFence = true
