package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/logtest"
	"github.com/fencegate/fencegate/protocol"
)

// TestPerfAttackForgedBelowFenceLoggedAsVerified breaks the operator
// contract of the rejection log (docs/operations.md, "Log levels": "a
// token that did not verify shows its claimed holder marked
// (unverified)"; rejectlog.go logRejected: "A token that did not verify
// is shown as it claims to be, marked unverified").
//
// Scenario: an attacker with broker access, holding no key, takes the
// body of a real token of holder "A" (it is public: every grant is
// retained on the grant topic) at a position below the fence, changes the
// signature and sends it. Since issue 15 (decide.go staleUnverified) the
// signature is never checked for a position below the fence; check puts
// the unverified token in p.tok, and logRejected shows p.tok.Holder as
// if it had verified. The audit log then says holder "A" sent a stale
// command — framing a legitimate supervisor — with nothing telling the
// operator that the token was never verified. Found: holder logged "A",
// want "A (unverified)".
//
// Fix: decide.go check — keep the unverified token out of p.tok (or mark
// it, e.g. a pending.unverified flag) and have rejectlog.go logRejected
// mark the holder "(unverified)" for a token the stale fast path did not
// verify.
func TestPerfAttackForgedBelowFenceLoggedAsVerified(t *testing.T) {
	rec := logtest.New()
	h := newHarness(t, "pump1")
	h.log = rec.Logger()
	h.start()
	wantResult(t, h.sup.Send(t, "pump1", set("real", h.token(10, "B"), 1)), protocol.StatusApplied, protocol.CodeOK)

	forged := forge(t, h.token(5, "A")) // A's genuine body, a signature no key made
	wantResult(t, h.sup.Send(t, "pump1", set("forged", forged, 2)), protocol.StatusRejected, protocol.CodeStaleToken)

	lines := rec.Matching(map[string]string{"msg": "command rejected", "id": "forged"})
	if len(lines) != 1 {
		t.Fatalf("want one rejection line for the forged command, got %d:\n%s", len(lines), rec.Dump())
	}
	if got := lines[0]["holder"]; !strings.Contains(got, "(unverified)") {
		t.Errorf("forged token's holder logged as %q, as if its signature had been checked; want %q\n%s",
			got, "A (unverified)", rec.Dump())
	}
}

// TestPerfAttackStateHolderChangeRateLimitedAfterRace breaks the state
// contract of issue 15 (docs/protocol.md, "State and status": the device
// state is rewritten "at once when the new fence has another epoch or
// holder than the last one announced").
//
// Scenario: two raises of one domain race — device pump1's decide accepts
// A's token 11 (raised moves the mirror to A@11 under dm.mu, releases it)
// and, before that goroutine reaches announce, a grant (settleGrants) or
// another device's decide raises to B@12 and announces it: the state says
// B@12. Then the first goroutine's announce(A@11) runs: its holder differs
// from the last announced (B), so it takes the immediate path and sets
// dm.announced to A@11 — a token older than what it publishes (publishState
// reads the mirror: B@12). From now on announce compares with A@11, not
// with the B@12 the retained state shows: A's next lease, A@13, counts as
// "same epoch and holder as the last announced" and is rate-limited, so
// the retained state keeps naming holder B for up to stateInterval while A
// holds the fence — the holder change is not announced at once.
//
// The interleaving is reproduced step by step on a real domain (the mirror
// update of raised, then the other raise, then the late announce); each
// step is exactly what the racing goroutines execute.
//
// Fix: agent/domain.go announce — ignore a tok that is not newer than
// dm.announced (the announcement already made covered it), or record as
// announced the fence publishStates actually read, never the caller's tok.
func TestPerfAttackStateHolderChangeRateLimitedAfterRace(t *testing.T) {
	dm, pub := stateDomain(time.Hour) // the trailing announcement would come only after an hour
	dm.raised(fenceToken("plant", 10, "Z"))

	// goroutine 1 (pump1's decide, A@11): first half of raised — the
	// mirror moves up; it has not reached announce yet.
	a11 := fenceToken("plant", 11, "A")
	dm.mu.Lock()
	dm.fence = a11
	dm.mu.Unlock()

	// goroutine 2 (settleGrants, B's grant 12): the whole raise, announced
	// at once (another holder).
	dm.raised(fenceToken("plant", 12, "B"))
	if _, seq := pub.last(); seq != 12 {
		t.Fatalf("B's raise: state at %d, want 12", seq)
	}

	// goroutine 1 resumes: the second half of raised.
	dm.announce(a11)

	// A acquires again (A@13): another holder than the retained state's B.
	dm.raised(fenceToken("plant", 13, "A"))
	n, seq := pub.last()
	if seq != 13 {
		last := pub.states[n-1].Fence
		t.Fatalf("after the fence moved from holder B (12) to holder A (13) the state still says %d/%s "+
			"(%d states): the holder change was rate-limited, not announced at once", last.Seq, last.Holder, n)
	}
}
