package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/protocol"
)

// A second attack on the power-loss checker (after its five findings were
// closed). Each test builds what a broken agent produces and asserts the
// checker reports it; each fails on the checker it was written against,
// for the reason its comment gives.

// entryLines encodes entries as an apply log's content (one JSON line each).
func entryLines(t *testing.T, entries ...sim.Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, e := range entries {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	return b.Bytes()
}

// stampNow is a result's "at" stamped now, a moment after the calls
// before it (the agent stamps its results in RFC 3339 with nanoseconds).
func stampNow() string {
	time.Sleep(time.Millisecond) // strictly after the ledger's last time.Now, even on a coarse clock
	return time.Now().UTC().Format(time.RFC3339Nano)
}

// addFiller records n answered commands (ok, journaled) of another device,
// so that the draw of older answers re-sent again has many to pick from.
func addFiller(led *ledger, n int) {
	for i := range n {
		led.answer(&plAck{ID: fmt.Sprintf("filler-%d", i), Op: "set", Device: "sim2", Domain: "d2", Epoch: 1, Seq: 1, Sent: time.Now()},
			protocol.Result{Code: protocol.CodeOK})
	}
}

// I4 after the next cut: a result the agent published in answer to a
// re-send (a never-answered command taken now; an expired command applied
// now) is an answer of the run the next cut ends, and must be re-sent
// after it like every other answer of that run. resent never puts the
// command back among the unchecked: a command never answered before has
// no first code (a.Code stays "", and it is not in l.acks), so it is never
// re-sent again; an expired one comes back only if the draw of 16 older
// answers happens to pick it. An agent that publishes a re-send's result
// before it is durable loses it at the next cut unseen.
func TestPowerLossAttack2ResendAnswerNotResentAfterNextCut(t *testing.T) {
	t.Run("never answered, then applied on its re-send", func(t *testing.T) {
		led := newLedger(&bytes.Buffer{})
		u := &plAck{ID: "u-1", Op: "set", Args: map[string]any{"value": 1}, Device: "sim1", Domain: "d1", Epoch: 1, Seq: 1, Sent: time.Now()}
		led.answer(u, protocol.Result{}) // the cut came before the answer
		led.nextRound()
		if due := led.due(time.Now(), resendSample, rand.New(rand.NewPCG(1, 2))); !contains(due, u) {
			t.Fatalf("precondition: %s not re-sent after cut 1", u.ID)
		}
		judgeLikeResend(led, u, protocol.Result{Code: protocol.CodeOK, Output: json.RawMessage(`{"value":1}`)}) // published in run 2
		cut2 := time.Now()
		led.nextRound()
		if due := led.due(cut2, resendSample, rand.New(rand.NewPCG(3, 4))); !contains(due, u) {
			t.Errorf("%s was answered ok in run 2 (its re-send), yet is not among the %d re-sends due after cut 2: "+
				"the result published in run 2 is never checked to survive a cut", u.ID, len(due))
		}
	})
	t.Run("expired, then applied on its re-send", func(t *testing.T) {
		led := newLedger(&bytes.Buffer{})
		x := &plAck{ID: "x-1", Op: "set", Args: map[string]any{"value": 2}, Device: "sim1", Domain: "d1", Epoch: 1, Seq: 1, Sent: time.Now()}
		led.answer(x, protocol.Result{Code: protocol.CodeExpired})
		addFiller(led, 500) // the ended run had other answers too
		led.nextRound()
		if due := led.due(time.Now(), resendSample, rand.New(rand.NewPCG(1, 2))); !contains(due, x) {
			t.Fatalf("precondition: %s not re-sent after cut 1", x.ID)
		}
		judgeLikeResend(led, x, protocol.Result{Code: protocol.CodeOK, Output: json.RawMessage(`{"value":2}`)}) // applied now, in run 2
		cut2 := time.Now()
		led.nextRound()
		if due := led.due(cut2, resendSample, rand.New(rand.NewPCG(3, 4))); !contains(due, x) {
			t.Errorf("%s was applied and answered ok in run 2 (its re-send), yet is not among the %d re-sends due after cut 2 "+
				"(only a lucky draw of older answers would pick it)", x.ID, len(due))
		}
	})
}

// I4, a retry answered with silence: a re-send that got no answer to
// judge (the 8 s passed, or the device answered busy all along) is counted
// as unanswered and dropped — judgeResend returns "" and resent does not
// keep the command due. A never-answered command is then never asked
// again; an answered one only by the chance draw. An agent that lost a
// command and answers its retries busy (or not at all) passes rule 1.
func TestPowerLossAttack2UnansweredResendDropped(t *testing.T) {
	for _, c := range []struct {
		name   string
		first  protocol.Result
		filler int
	}{
		{"never answered", protocol.Result{}, 0},
		{"answered ok", protocol.Result{Code: protocol.CodeOK, Output: json.RawMessage(`{"value":3}`)}, 500},
	} {
		for _, resend := range []protocol.Result{{}, {Code: protocol.CodeBusy}} {
			t.Run(c.name+", re-send answered "+codeText(resend.Code), func(t *testing.T) {
				led := newLedger(&bytes.Buffer{})
				a := &plAck{ID: "a-1", Op: "set", Args: map[string]any{"value": 3}, Device: "sim1", Domain: "d1", Epoch: 1, Seq: 1, Sent: time.Now()}
				led.answer(a, c.first)
				addFiller(led, c.filler)
				led.nextRound()
				if due := led.due(time.Now(), resendSample, rand.New(rand.NewPCG(1, 2))); !contains(due, a) {
					t.Fatalf("precondition: %s not re-sent after cut 1", a.ID)
				}
				if v := judgeLikeResend(led, a, resend); v != "" {
					t.Fatalf("precondition: a re-send without an answer judged %q", v)
				}
				cut2 := time.Now()
				led.nextRound()
				due := led.due(cut2, resendSample, rand.New(rand.NewPCG(3, 4)))
				if !contains(due, a) && len(led.violationsFrom(0)) == 0 {
					t.Errorf("the re-send of %s after cut 1 got no answer to judge, and after cut 2 it is not due again (%d due) "+
						"and no violation was recorded: its fate is never checked", a.ID, len(due))
				}
			})
		}
	}
}

// I3 (durable before apply): the apply logs show a command reached its
// device — here one the cut left without an answer — yet after the
// restart the agent answers it afresh (stale_token, not duplicate): it did
// not know a command its device had applied, so the accepted record was
// not durable when the driver saw the command. A correct agent journals
// the command before the driver sees it and answers any later send from
// the journal (in_doubt or its result, marked duplicate). The checker
// never puts the apply-log union and the answers together: judgeResend
// accepts any non-in_doubt answer to a never-answered command, and no
// answer is compared with the applies seen. Both paths miss it: the
// checker's re-send, and the supervisor's own retry answered in the next
// run (both answers stamped after the restart: the new run's agent gave
// them, not a late delivery of the ended run's).
func TestPowerLossAttack2AppliedButForgotten(t *testing.T) {
	t0 := time.Now().UTC().Add(-2 * time.Second) // the apply is well before the cut (nextRound's now)
	applied := sim.Entry{Device: "sim1", ID: "x-1", Op: "set", Domain: "d1", Epoch: 1, Seq: 4, Holder: "sup1",
		Args: json.RawMessage(`{"value":7}`), Started: t0, At: t0.Add(time.Millisecond)}
	setup := func(t *testing.T) (*ledger, *plAck) {
		led := newLedger(&bytes.Buffer{})
		al := newApplyLogs([]string{"sim1"}, t.TempDir())
		x := &plAck{ID: "x-1", Op: "set", Args: map[string]any{"value": 7}, Device: "sim1", Domain: "d1", Epoch: 1, Seq: 4, Sent: t0.Add(-time.Second)}
		// A higher token of the domain acknowledged on another device: after the
		// restart the fence refuses x, if the agent does not know it.
		led.answer(&plAck{ID: "y-1", Op: "set", Device: "sim2", Domain: "d1", Epoch: 1, Seq: 5, Sent: t0.Add(time.Second)}, protocol.Result{Code: protocol.CodeOK})
		al.scanCaptured(map[string][]byte{logName("sim1"): entryLines(t, applied)}, "at cut 1", led)
		return led, x
	}
	t.Run("re-send after the cut", func(t *testing.T) {
		led, x := setup(t)
		led.answer(x, protocol.Result{}) // the supervisor gave up: no answer before the cut
		led.nextRound()
		judgeLikeResend(led, x, protocol.Result{Code: protocol.CodeStaleToken, At: stampNow()})
		if vs := led.violationsFrom(0); len(vs) == 0 {
			t.Errorf("device sim1 applied %s before the cut, and after it the agent answered its re-send stale_token afresh "+
				"(it had no record of it): no violation, want one (I3)", x.ID)
		}
	})
	t.Run("the supervisor's own retry in the next run", func(t *testing.T) {
		led, x := setup(t)
		led.nextRound()
		led.answer(x, protocol.Result{Code: protocol.CodeStaleToken, At: stampNow()}) // the SDK's retry reached the restarted agent
		if vs := led.violationsFrom(0); len(vs) == 0 {
			t.Errorf("device sim1 applied %s before the cut, and the restarted agent answered the supervisor's retry stale_token "+
				"afresh: no violation, want one (I3)", x.ID)
		}
	})
}

// I2 across the devices of a domain: the fence is the domain's. sim1
// applied token 1.5 of domain d1; two seconds later sim3, in the same
// domain, applied 1.4 (a command queued before 1.5 was acknowledged, so
// the ledger does not hold it to 1.5, and sim3's own fence never saw 1.5).
// By I3 the agent had made 1.5 durable before sim1 saw it, so 1.4 entered
// a driver after 1.5 was durably accepted: the recheck "at the moment it
// would enter the driver" was skipped. The apply logs are checked per
// (device, domain) only, so an agent without that recheck passes.
func TestPowerLossAttack2ApplyLogBackwardsAcrossDevices(t *testing.T) {
	led := newLedger(&bytes.Buffer{})
	al := newApplyLogs([]string{"sim1", "sim3"}, t.TempDir())
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	e := func(dev, id string, seq uint64, started time.Duration) sim.Entry {
		return sim.Entry{Device: dev, ID: id, Op: "set", Domain: "d1", Epoch: 1, Seq: seq, Holder: "sup1",
			Started: t0.Add(started), At: t0.Add(started + 10*time.Millisecond)}
	}
	al.check("sim1", []sim.Entry{e("sim1", "hi", 5, time.Second)}, "before cut 1", led)
	al.check("sim3", []sim.Entry{e("sim3", "older", 3, 0), e("sim3", "lo", 4, 3*time.Second)}, "before cut 1", led)
	if n := rulesOf(led.violationsFrom(0))[RuleFence]; n == 0 {
		t.Errorf("sim1 applied 1.5 of d1 at +1.01s, sim3 (d1) took 1.4 at +3s: no %s violation, want one", RuleFence)
	}
}

// I2 for a command sent before the cut and taken by the restarted agent:
// x (token 1.4) was sent before 1.5 of its domain was acknowledged, the
// power went, and the supervisor's retry reached the restarted agent,
// which applied it afresh (not duplicate, stamped after the restart). The
// restarted agent took x after its start, and it had 1.5 durably by then
// (1.5 was acknowledged before the cut), so x had to be refused. answer
// holds every first answer to the fence as of the first send (a.Sent),
// which is right for a command the ended run took, but here lets a stale
// apply by the new run through (an agent that lost its domain fence at the
// cut and got it back from the retained grant only after the retries).
func TestPowerLossAttack2RetryTakenByRestartedAgent(t *testing.T) {
	led := newLedger(&bytes.Buffer{})
	x := &plAck{ID: "x-1", Op: "set", Args: map[string]any{"value": 1}, Device: "sim3", Domain: "d1", Epoch: 1, Seq: 4, Sent: time.Now()}
	led.answer(&plAck{ID: "y-1", Op: "set", Device: "sim1", Domain: "d1", Epoch: 1, Seq: 5, Sent: time.Now()}, protocol.Result{Code: protocol.CodeOK})
	led.nextRound() // the cut; the agent restarts
	led.answer(x, protocol.Result{Code: protocol.CodeOK, Duplicate: false, At: stampNow()})
	if n := rulesOf(led.violationsFrom(0))[RuleFence]; n == 0 {
		t.Errorf("%s (1.4) applied afresh by the restarted agent after 1.5 of d1 was acknowledged before the cut: no %s violation, want one", x.ID, RuleFence)
	}
}

// I4 for idempotent ops: a driver may re-apply an idempotent op only when
// it is in doubt, and a command is in doubt only after a restart (the
// store marks it at Open). Two applies of one get in a copy read before
// any cut cannot come from a correct agent: the agent applied an SDK
// retry of a command it already had. rule 3 (applies) skips every
// idempotent apply, whatever the rounds. (TestPowerLossApplyLogUnion's
// "g applied again" has no cut between its applies either: with a fix it
// needs one.)
func TestPowerLossAttack2IdempotentAppliedTwiceWithoutCut(t *testing.T) {
	led := newLedger(&bytes.Buffer{})
	al := newApplyLogs([]string{"sim1"}, t.TempDir())
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	g := func(at time.Duration) sim.Entry {
		return sim.Entry{Device: "sim1", ID: "g-1", Op: "get", Idempotent: true, Domain: "d1", Epoch: 1, Seq: 1, Holder: "sup1",
			Started: t0.Add(at), At: t0.Add(at + time.Millisecond)}
	}
	al.check("sim1", []sim.Entry{g(0), g(200 * time.Millisecond)}, "before cut 1", led)
	if n := rulesOf(led.violationsFrom(0))[RuleApplyLog]; n == 0 {
		t.Errorf("get g-1 applied twice in the run before the first cut (it was never in doubt): no %s violation, want one", RuleApplyLog)
	}
}
