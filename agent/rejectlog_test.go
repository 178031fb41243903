package agent

import (
	"testing"

	"github.com/fencegate/fencegate/internal/logtest"
	"github.com/fencegate/fencegate/protocol"
)

// TestRejectionsLogged: stale, invalid and wrong-domain commands are logged
// at info with device, id, holder, token and fence.
func TestRejectionsLogged(t *testing.T) {
	rec := logtest.New()
	h := newHarness(t, "pump1")
	h.log = rec.Logger()
	h.start()
	wantResult(t, h.sup.Send(t, "pump1", set("new", h.token(9, "B"), 1)), protocol.StatusApplied, protocol.CodeOK)
	wantResult(t, h.sup.Send(t, "pump1", set("old", h.token(3, "A"), 1)), protocol.StatusRejected, protocol.CodeStaleToken)
	wantResult(t, h.sup.Send(t, "pump1", set("forged", "fg1.garbage.x", 1)), protocol.StatusRejected, protocol.CodeInvalidToken)
	wantResult(t, h.sup.Send(t, "pump1", set("other", h.tokenIn("mill", 20, "C"), 1)), protocol.StatusRejected, protocol.CodeWrongDomain)
	for _, want := range []map[string]string{
		// A token claiming a position below the fence is answered stale_token
		// without its signature check (decide.go staleUnverified): its holder
		// is only what it claims.
		{"msg": "command rejected", "level": "INFO", "device": "pump1", "id": "old", "code": "stale_token", "holder": "A (unverified)", "fence": "1.9/B"},
		{"msg": "command rejected", "level": "INFO", "device": "pump1", "id": "forged", "code": "invalid_token"},
		{"msg": "command rejected", "level": "INFO", "device": "pump1", "id": "other", "code": "wrong_domain", "holder": "C"},
	} {
		if len(rec.Matching(want)) != 1 {
			t.Errorf("no log line %v in:\n%s", want, rec.Dump())
		}
	}
}
