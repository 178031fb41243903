package chaos

import (
	"bytes"
	"testing"
	"time"

	"github.com/fencegate/fencegate/protocol"
)

// Attacks on the power-loss checker: each test builds a scenario a broken
// agent produces and asserts the checker reports it. These two were fixed;
// the findings still open are in powerloss_open_findings_test.go.

// judgeLikeResend runs, for one re-send of a answered res, the steps
// resend does for each job (expected, judgeResend, resent, violate): the
// checker's whole verdict on that re-send, without a client.
func judgeLikeResend(led *ledger, a *plAck, res protocol.Result) string {
	expect := led.expected(a)
	verdict := judgeResend(a, expect, res)
	led.resent(a, res, verdict)
	if verdict != "" {
		led.violate(RuleResend, verdict)
	}
	return verdict
}

func rulesOf(vs []plViolation) map[string]int {
	out := map[string]int{}
	for _, v := range vs {
		out[v.Rule]++
	}
	return out
}

// I4: a result the agent published (ok) survives a crash. A re-send after
// the cut answered in_doubt means the agent lost the published result, yet
// rule 1 accepts in_doubt whatever was answered before (it is only counted
// as "weakened").
func TestPowerLossAttackInDoubtAfterPublishedResult(t *testing.T) {
	led := newLedger(&bytes.Buffer{})
	a := &plAck{ID: "s-1", Op: "set", Device: "sim1", Domain: "d1", Epoch: 1, Seq: 1, Sent: time.Now()}
	led.answer(a, protocol.Result{Code: protocol.CodeOK})
	judgeLikeResend(led, a, protocol.Result{Code: protocol.CodeInDoubt, Duplicate: true})
	if n := rulesOf(led.violationsFrom(0))[RuleResend]; n != 1 {
		t.Errorf("ok before the cut, in_doubt after it: %d %s violations, want 1 (the published result was lost, I4)", n, RuleResend)
	}
}

// I4 / rule 1 "never a fresh apply": an in_doubt answer NOT marked
// duplicate says the agent did not know the id and took the command as new
// (it entered the driver again, and then was left in doubt). judgeResend
// returns "" for any in_doubt before it looks at Duplicate.
func TestPowerLossAttackFreshInDoubtAfterResult(t *testing.T) {
	set := &plAck{ID: "s-1", Op: "set", Device: "sim1"}
	for _, expect := range []protocol.Code{protocol.CodeOK, protocol.CodeDeviceError, protocol.CodeInDoubt} {
		if v := judgeResend(set, expect, protocol.Result{Code: protocol.CodeInDoubt, Duplicate: false}); v == "" {
			t.Errorf("answered %s before the cut, a fresh (not duplicate) in_doubt after it: no verdict, want a violation (the journal forgot the id)", expect)
		}
	}
}
