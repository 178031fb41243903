package agent

import (
	"testing"
	"time"

	"github.com/fencegate/fencegate/protocol"
)

// A retry of a command the agent journaled before a crash gets the
// journaled answer (in_doubt) even after the command's deadline passed —
// not "expired", which says "not applied" of a command that may have been
// (found by the fault harness: a supervisor's resend after an agent restart
// was answered expired, a later one in_doubt).
func TestRetryOfJournaledCommandAfterDeadlineGetsJournaledAnswer(t *testing.T) {
	e := newProcEnv(t, childDevice{id: "pump1", extra: ", ops: [{name: set}, {name: slow, latency: 2s}]"})
	e.start()
	cmd := protocol.Command{ID: "slow1", Token: e.token(2, "A"), Op: "slow",
		DeadlineMs: time.Now().Add(10 * time.Second).UnixMilli()}
	fenced := e.watchFence("pump1", 2)
	e.ctl.PublishRaw(t, "pump1", mustJSON(cmd))
	select {
	case <-fenced:
	case <-time.After(15 * time.Second):
		t.Fatal("the agent never raised the fence for slow1")
	}
	e.kill() // mid-apply: slow1 is in doubt
	e.start()
	cmd.DeadlineMs = time.Now().Add(-time.Second).UnixMilli() // the retry arrives after the deadline
	r := e.ctl.Send(t, "pump1", cmd)
	wantResult(t, r, protocol.StatusInDoubt, protocol.CodeInDoubt)
	if !r.Duplicate {
		t.Errorf("answer %+v, want the journaled one (duplicate)", r)
	}
	fresh := protocol.Command{ID: "never", Token: e.token(2, "A"), Op: "set", Args: []byte(`{"value":1}`),
		DeadlineMs: time.Now().Add(-time.Second).UnixMilli()}
	wantResult(t, e.ctl.Send(t, "pump1", fresh), protocol.StatusRejected, protocol.CodeExpired)
	e.stop()
}
