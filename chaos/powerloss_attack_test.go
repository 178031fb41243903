package chaos

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/protocol"
)

// Attacks on the power-loss checker: each test builds a scenario a broken
// agent produces and asserts the checker reports it. Each failed on the
// checker the attack was made on, and was fixed.

// judgeLikeResend runs, for one re-send of a answered res, the steps
// resend does for each job (expected, judgeResend, resent, violate): the
// checker's whole verdict on that re-send, without a client.
func judgeLikeResend(led *ledger, a *plAck, res protocol.Result) string {
	expect := led.expected(a)
	verdict := judgeResend(a, expect, res)
	led.resent(a, time.Now(), res, verdict)
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
		if v := judgeResend(set, resendExpect{code: expect}, protocol.Result{Code: protocol.CodeInDoubt, Duplicate: false}); v == "" {
			t.Errorf("answered %s before the cut, a fresh (not duplicate) in_doubt after it: no verdict, want a violation (the journal forgot the id)", expect)
		}
	}
}

// I4: "a retried command gets the same result back". The ledger keeps only
// the code, so a re-send answered ok, duplicate, with another output than
// the one published passes.
func TestPowerLossAttackOutputChanged(t *testing.T) {
	led := newLedger(&bytes.Buffer{})
	a := &plAck{ID: "s-1", Op: "set", Device: "sim1", Domain: "d1", Epoch: 1, Seq: 1, Sent: time.Now()}
	led.answer(a, protocol.Result{Code: protocol.CodeOK, Output: json.RawMessage(`{"value":1}`)})
	v := judgeLikeResend(led, a, protocol.Result{Code: protocol.CodeOK, Duplicate: true, Output: json.RawMessage(`{"value":999}`)})
	if v == "" {
		t.Errorf("published output {\"value\":1}, re-send answered {\"value\":999} (duplicate): no verdict, want a violation (not the same result)")
	}
}

// I2 (through a re-send): a command answered expired under token 1.4, then
// token 1.5 of its domain acknowledged, is re-sent after the cut and the
// agent applies it afresh under 1.4. Rule 1 allows an expired command to be
// applied now, and no one compares a re-send's token with the domain's
// highest acknowledged one: the stale apply passes. The same holds for an
// idempotent command in doubt.
func TestPowerLossAttackResendAppliedUnderStaleToken(t *testing.T) {
	for _, c := range []struct {
		name  string
		a     *plAck
		first protocol.Code
	}{
		{"expired set", &plAck{ID: "old-set", Op: "set", Device: "sim1", Domain: "d1", Epoch: 1, Seq: 4}, protocol.CodeExpired},
		{"in-doubt get", &plAck{ID: "old-get", Op: "get", Idempotent: true, Device: "sim1", Domain: "d1", Epoch: 1, Seq: 4}, protocol.CodeInDoubt},
	} {
		led := newLedger(&bytes.Buffer{})
		c.a.Sent = time.Now()
		led.answer(c.a, protocol.Result{Code: c.first})
		led.answer(&plAck{ID: "high", Op: "set", Device: "sim1", Domain: "d1", Epoch: 1, Seq: 5, Sent: time.Now()}, protocol.Result{Code: protocol.CodeOK})
		if vs := led.violationsFrom(0); len(vs) != 0 {
			t.Fatalf("%s: violations %v before the re-send, want none", c.name, vs)
		}
		led.nextRound()
		judgeLikeResend(led, c.a, protocol.Result{Code: protocol.CodeOK, Duplicate: false})
		if n := len(led.violationsFrom(0)); n == 0 {
			t.Errorf("%s: re-sent under 1.4 after 1.5 was acknowledged and applied afresh: no violation, want one (a stale token entered the driver)", c.name)
		}
	}
}

// I2/I3 in the apply logs: a device applied token 1.5 (seen in the copy
// before the cut), the cut lost that line (the log is not synced), and
// after the restart it applied 1.4. Each copy alone never goes backwards,
// and sim.CheckLog only ever sees one copy; the union is only used for
// duplicate ids, so the backwards step is never seen.
func TestPowerLossAttackApplyLogBackwardsAcrossCopies(t *testing.T) {
	led := newLedger(&bytes.Buffer{})
	al := newApplyLogs([]string{"sim1"}, t.TempDir())
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	e := func(id string, seq uint64, at time.Duration) sim.Entry {
		return sim.Entry{Device: "sim1", ID: id, Op: "set", Domain: "d1", Epoch: 1, Seq: seq, Holder: "sup1", At: t0.Add(at)}
	}
	al.check("sim1", []sim.Entry{e("a", 3, 1), e("b", 5, 2)}, "before cut 1", led)
	al.check("sim1", []sim.Entry{e("a", 3, 1)}, "after cut 1", led) // b's line was lost
	al.check("sim1", []sim.Entry{e("a", 3, 1), e("c", 4, 3*time.Second)}, "before cut 2", led)
	if n := rulesOf(led.violationsFrom(0))[RuleFence]; n == 0 {
		t.Errorf("device applied 1.5, then (after the cut) 1.4: no %s violation, want one", RuleFence)
	}
}

// I3: a command the supervisor got no answer for (the cut came first) may
// have entered the driver; the agent must have journaled it as accepted
// before. The checker drops unanswered commands (answer only counts them),
// so they are never re-sent: an agent that applies before its "accepted"
// record is durable, then forgets the command, is never asked about it.
func TestPowerLossAttackUnansweredNeverResent(t *testing.T) {
	led := newLedger(&bytes.Buffer{})
	a := &plAck{ID: "lost-1", Op: "set", Device: "sim1", Domain: "d1", Epoch: 1, Seq: 1, Sent: time.Now()}
	led.answer(a, protocol.Result{})
	due := led.due(time.Now().Add(time.Hour), resendSample, rand.New(rand.NewPCG(1, 2)))
	if !contains(due, a) {
		t.Errorf("unanswered command %s not among the %d re-sends due after the cut: its fate is never checked", a.ID, len(due))
	}
}

// An answer recorded just after cutAt (the agent published it before the
// cut took effect, the SDK handed it over a moment later) is left for the
// next cut; after the last cut nothing re-sends what is left: the campaign
// ends with answers never checked.
func TestPowerLossAttackLastCutLeavesAnswersUnchecked(t *testing.T) {
	led := newLedger(&bytes.Buffer{})
	cutAt := time.Now()
	a := &plAck{ID: "late-1", Op: "set", Device: "sim1", Domain: "d1", Epoch: 1, Seq: 1, Sent: cutAt.Add(-time.Second)}
	led.answer(a, protocol.Result{Code: protocol.CodeOK}) // recorded after cutAt, in the run the cut ended
	led.nextRound()                                       // the agent restarts
	due := led.due(cutAt, resendSample, rand.New(rand.NewPCG(1, 2)))
	if !contains(due, a) {
		t.Errorf("answer of %s sent before the last cut and recorded just after cutAt is not re-sent after it (%d due), and no later cut will", a.ID, len(due))
	}
}
