//go:build fencegate_mutant_nosync

package persist

// MutantNoSync: see mutation_nosync_off.go. This build never fsyncs a commit.
const MutantNoSync = true
