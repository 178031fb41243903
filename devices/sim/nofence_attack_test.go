package sim

import "testing"

// Found by an attack on the fault harness (devices/sim no_fence): a no_fence device applies stale tokens
// (it "trusts the agent's fence alone"), yet Describe still says
// ChecksTokens: true — "the device itself keeps a highest token and
// refuses stale ones (a second fence at the hardware)". Whatever reads
// the capability (the agent's logs and status, a future relaxation of the
// agent's checks for token-aware devices, an operator deciding whether
// broker ACLs matter, I7) is told there is a second fence where there is
// none. The plugin simdevice inherits it: the fault harness's plugin
// device describes itself as token-checking too.
func TestAttackNoFenceDeviceClaimsToCheckTokens(t *testing.T) {
	d := mustNew(t, Config{NoFence: true})
	mustApply(t, d, cmd("a", "set", `{"value":1}`, tok(1, 5, "new")))
	mustApply(t, d, cmd("b", "set", `{"value":2}`, tok(1, 4, "old"))) // refused by no fence
	if d.Describe().ChecksTokens {
		t.Fatal("a no_fence device applied d1@1.4 after d1@1.5 but describes ChecksTokens: true")
	}
}
