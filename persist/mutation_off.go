//go:build !fencegate_mutant_nofence

package persist

// MutantNoFence is true only in a build with the tag
// fencegate_mutant_nofence: a deliberately broken agent whose fence
// comparison is off (a stale token is accepted as if current, and the
// agent's recheck before the driver passes it). The fault harness's
// mutation test builds it to prove that the harness sees the I2 violations
// that follow. Never build a product with the tag.
const MutantNoFence = false
