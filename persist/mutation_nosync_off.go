//go:build !fencegate_mutant_nosync

package persist

// MutantNoSync is true only in a build with the tag fencegate_mutant_nosync:
// a deliberately broken agent whose fence store opens bbolt with NoSync, so
// no commit is ever fsynced (accepts, fence raises and results survive a
// crash of the process, not a power loss). It exists only for the fault
// harness's power-loss mutation test, which must see the violations that
// follow (fencechaos --power-loss). Never build a product with the tag.
const MutantNoSync = false
