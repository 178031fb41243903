package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence/fencetest"
	"github.com/fencegate/fencegate/protocol"
)

// TestAttack16QueuedCommandOfRemovedKeyIsRefused: the attacker holds a
// stolen controller key and has queued a command signed with it behind a
// slow one on the same device. The operator rotates at once: SIGHUP
// (ReloadTrust) removes the stolen key. docs/security.md promises "every
// token of the removed key is refused the moment agents reload" and
// docs/operations.md "a removed key's tokens are refused at once"; the
// command still waiting in the device's queue has not entered the driver
// yet, yet the pre-driver recheck (agent/apply.go recheck) compares only
// the fence position and never asks the key ring again, so the stolen
// key's command is applied after the reload.
func TestAttack16QueuedCommandOfRemovedKeyIsRefused(t *testing.T) {
	h := newHarness(t, "pump1")
	h.cfg.Devices[0].Settings = simSettings(t, fmt.Sprintf("latency: 3s\nlog: %s", filepath.Join(h.dir, "pump1.log")))
	h.start()
	next := fencetest.MustSigner(t, 2)
	newDir := filepath.Join(h.dir, "next")
	if err := os.MkdirAll(newDir, 0o700); err != nil {
		t.Fatal(err)
	}
	newPub := fencetest.WritePublicKey(t, newDir, next)

	stolen := h.token(4, "attacker") // signed by the key about to be removed
	h.sup.Publish(t, "pump1", set("slow", stolen, 1))
	time.Sleep(500 * time.Millisecond) // "slow" is in the driver for 3 s
	h.sup.Publish(t, "pump1", set("queued", stolen, 666))
	time.Sleep(700 * time.Millisecond) // "queued" is verified, journaled and waits

	if _, removed, err := h.agent.ReloadTrust([]string{newPub}); err != nil || len(removed) != 1 {
		t.Fatalf("reload: removed %v err %v", removed, err)
	}
	h.sup.Wait(t, "slow") // entered the driver before the reload: its business
	r := h.sup.Wait(t, "queued")
	if r.Status == protocol.StatusApplied {
		t.Fatalf("a command signed by a key removed before it entered the driver was applied after the reload (%s/%s): the stolen key still drives the device", r.Status, r.Code)
	}
	wantResult(t, r, protocol.StatusRejected, protocol.CodeInvalidToken)
}
