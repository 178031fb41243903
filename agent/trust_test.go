package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/fence/fencetest"
	"github.com/fencegate/fencegate/protocol"
)

// TestReloadTrust: a reload adds a key at once, a failed reload changes
// nothing, and a removed key's tokens are refused at once — also a token
// verified (and cached) a moment before — while the fence it raised stays.
func TestReloadTrust(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	oldPub := h.cfg.Trust.Keys[0]
	next := fencetest.MustSigner(t, 2)
	newDir := filepath.Join(h.dir, "next")
	if err := os.MkdirAll(newDir, 0o700); err != nil {
		t.Fatal(err)
	}
	newPub := fencetest.WritePublicKey(t, newDir, next)
	newTok := fencetest.MustToken(t, next, "plant", 1, 5, "B").Raw
	wantResult(t, h.sup.Send(t, "pump1", set("n0", newTok, 0)), protocol.StatusRejected, protocol.CodeInvalidToken)

	if _, _, err := h.agent.ReloadTrust([]string{oldPub, filepath.Join(h.dir, "missing.pub")}); err == nil {
		t.Fatal("a reload naming a missing file succeeded")
	}
	if got := len(h.agent.TrustedKeys()); got != 1 {
		t.Fatalf("a failed reload changed the keys: %d trusted", got)
	}
	added, removed, err := h.agent.ReloadTrust([]string{oldPub, newPub})
	if err != nil || len(added) != 1 || added[0] != next.KeyID() || len(removed) != 0 {
		t.Fatalf("add: added %v removed %v err %v", added, removed, err)
	}
	wantResult(t, h.sup.Send(t, "pump1", set("o1", h.token(4, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
	cached := h.token(6, "A")
	wantResult(t, h.sup.Send(t, "pump1", set("o2", cached, 2)), protocol.StatusApplied, protocol.CodeOK)

	_, removed, err = h.agent.ReloadTrust([]string{newPub})
	if err != nil || len(removed) != 1 || removed[0] != h.signer.KeyID() {
		t.Fatalf("remove: removed %v err %v", removed, err)
	}
	r := h.sup.Send(t, "pump1", set("o3", cached, 3))
	wantResult(t, r, protocol.StatusRejected, protocol.CodeInvalidToken)
	// the fence the removed key raised stays: a new-key token below it is stale
	wantResult(t, h.sup.Send(t, "pump1", set("n1", newTok, 4)), protocol.StatusRejected, protocol.CodeStaleToken)
	higher := fencetest.MustToken(t, next, "plant", 1, 7, "B").Raw
	wantResult(t, h.sup.Send(t, "pump1", set("n2", higher, 5)), protocol.StatusApplied, protocol.CodeOK)
}
