package check

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/chaos/history"
)

// A grant that starts after another ended must be above it.
func TestGrantOrderLowerAfterHigherFails(t *testing.T) {
	r := Check(Input{Ops: []history.Op{
		grant("sup1", "d1", 1, 2, 0, 10),
		grant("sup2", "d1", 1, 1, 20, 30),
	}})
	v := wantViolation(t, r, I1, "grant not above an earlier one", "sup2 acquire d1@1.1/sup2", "sup1 acquire d1@1.2/sup1")
	if !strings.Contains(v.Message, fmtTime(ms(20))) || !strings.Contains(v.Message, fmtTime(ms(10))) {
		t.Errorf("message lacks the times: %s", v.Message)
	}
}

// Overlapping grants may come in any position order: porcupine can order
// the lower one first.
func TestGrantOrderOverlappingPasses(t *testing.T) {
	wantClean(t, Check(Input{Ops: []history.Op{
		grant("sup1", "d1", 1, 2, 0, 10),
		grant("sup2", "d1", 1, 1, 5, 30), // started before the first ended
		grant("sup3", "d1", 1, 3, 40, 50),
	}}))
}

// Grant order is per domain: a lower position in another domain is fine.
func TestGrantOrderIsPerDomain(t *testing.T) {
	wantClean(t, Check(Input{Ops: []history.Op{
		grant("sup1", "d1", 1, 2, 0, 10),
		grant("sup2", "d2", 1, 1, 20, 30),
	}}))
}

// Two requesters never share a position.
func TestSharedPositionFails(t *testing.T) {
	r := Check(Input{Ops: []history.Op{
		grant("sup1", "d1", 1, 3, 0, 10),
		grant("sup2", "d1", 1, 3, 5, 15),
	}})
	wantViolation(t, r, I1, "position 1.3 granted to more than one acquire", "sup1 acquire", "sup2 acquire")
}

// Two acquire ops of one proc granted the same position are two grants
// (each op is its own request; the SDK's resends stay inside one op): a
// controller that re-minted a position it had handed out.
func TestSharedPositionSameRequesterFails(t *testing.T) {
	r := Check(Input{Ops: []history.Op{
		grant("sup1", "d1", 1, 3, 0, 10),
		grant("sup1", "d1", 1, 3, 20, 30),
	}})
	wantViolation(t, r, I1, "position 1.3 granted to more than one acquire")
}

// One holder at a time: a lease valid past the end of the next holder's
// grant is two holders.
func TestOneHolderLostValidPastNextGrantFails(t *testing.T) {
	r := Check(Input{Ops: []history.Op{
		grant("sup1", "d1", 1, 1, 0, 5),
		event(history.Lost, "sup1", "d1", 1, 1, 120, 100),
		grant("sup2", "d1", 1, 2, 50, 90),
	}})
	wantViolation(t, r, I1, "two holders at once", "lease 1.1 of sup1 valid until "+fmtTime(ms(100)), "sup2 acquire d1@1.2")
}

// The near miss: validity ends exactly at the grant's end, or within the
// clock slack.
func TestOneHolderBoundaryAndSlackPass(t *testing.T) {
	ops := []history.Op{
		grant("sup1", "d1", 1, 1, 0, 5),
		event(history.Lost, "sup1", "d1", 1, 1, 120, 100),
		grant("sup2", "d1", 1, 2, 50, 100),
	}
	wantClean(t, Check(Input{Ops: ops}))
	ops[2] = grant("sup2", "d1", 1, 2, 50, 95)
	wantClean(t, Check(Input{Ops: ops, ClockSlack: 5 * time.Millisecond}))
	r := Check(Input{Ops: ops, ClockSlack: 4 * time.Millisecond})
	wantViolation(t, r, I1, "two holders at once", "slack 4000000ns")
}

// A release ends validity at its start, even if ValidUntil is later; the
// earliest of several records counts.
func TestOneHolderReleaseEndsValidity(t *testing.T) {
	ops := []history.Op{
		grant("sup1", "d1", 1, 1, 0, 5),
		release("sup1", "d1", "released", 1, 1, 80, 85, 500),
		event(history.Held, "sup1", "d1", 1, 1, 600, 700),
		grant("sup2", "d1", 1, 2, 82, 90),
	}
	wantClean(t, Check(Input{Ops: ops}))
	ops[1] = release("sup1", "d1", "released", 1, 1, 95, 96, 500) // released after sup2 got it
	r := Check(Input{Ops: ops})
	wantViolation(t, r, I1, "two holders at once", "valid until "+fmtTime(ms(95)))
}

// Every earlier lease counts, not only the one just below.
func TestOneHolderOlderLeaseCounts(t *testing.T) {
	r := Check(Input{Ops: []history.Op{
		grant("sup1", "d1", 1, 1, 0, 5),
		event(history.Held, "sup1", "d1", 1, 1, 400, 300),
		grant("sup2", "d1", 1, 2, 100, 110),
		event(history.Lost, "sup2", "d1", 1, 2, 150, 140),
		grant("sup3", "d1", 1, 3, 200, 210),
	}})
	wantViolation(t, r, I1, "lease 1.1 of sup1", "sup2 acquire d1@1.2")
	wantViolation(t, r, I1, "lease 1.1 of sup1", "sup3 acquire d1@1.3")
	if n := count(r, I1); n != 2 {
		t.Errorf("%d I1 violations, want 2: %v", n, r.Violations)
	}
}

// Two leases of one holder may overlap: that is not two holders.
func TestOneHolderSameHolderPasses(t *testing.T) {
	wantClean(t, Check(Input{Ops: []history.Op{
		grant("sup1", "d1", 1, 1, 0, 5),
		event(history.Lost, "sup1", "d1", 1, 1, 120, 100),
		grant("sup1", "d1", 1, 2, 50, 60),
	}}))
}

// A Lost op without ValidUntil says nothing about validity.
func TestOneHolderLostWithoutValidUntilIgnored(t *testing.T) {
	l := event(history.Lost, "sup1", "d1", 1, 1, 120, 0)
	l.ValidUntil = 0
	wantClean(t, Check(Input{Ops: []history.Op{grant("sup1", "d1", 1, 1, 0, 5), l, grant("sup2", "d1", 1, 2, 50, 60)}}))
}

// Releasing a superseded lease answered released is not linearizable, even
// though no real-time rule sees it.
func TestLinearizableReleaseOfSupersededFails(t *testing.T) {
	r := Check(Input{Ops: []history.Op{
		grant("sup1", "d1", 1, 1, 0, 10),
		grant("sup2", "d1", 1, 2, 20, 30),
		release("sup1", "d1", "released", 1, 1, 40, 50, 15),
	}})
	v := wantViolation(t, r, I1, "domain d1: lease history not linearizable", "sup1 release d1@1.1/sup1")
	if count(r, I1) != 1 {
		t.Errorf("want only the porcupine violation, got %v", r.Violations)
	}
	t.Log(v)
}

// The near misses: the same release answered not_holder, or overlapping the
// newer grant (it may have come first), or unanswered.
func TestLinearizableReleaseNearMissesPass(t *testing.T) {
	for name, rel := range map[string]history.Op{
		"not_holder":  release("sup1", "d1", "not_holder", 1, 1, 40, 50, 15),
		"overlapping": release("sup1", "d1", "released", 1, 1, 15, 25, 15),
		"unanswered":  release("sup1", "d1", "released", 1, 1, 40, -1, 15),
	} {
		t.Run(name, func(t *testing.T) {
			wantClean(t, Check(Input{Ops: []history.Op{
				grant("sup1", "d1", 1, 1, 0, 10),
				grant("sup2", "d1", 1, 2, 20, 30),
				rel,
			}}))
		})
	}
}

// A release of the current lease answered released is legal, also after
// other answers (held, busy) and unanswered acquires.
func TestLinearizableOtherAnswersPass(t *testing.T) {
	wantClean(t, Check(Input{Ops: []history.Op{
		grant("sup1", "d1", 1, 1, 0, 10),
		acquire("sup2", "d1", "held", 0, 0, 12, 14),
		acquire("sup3", "d1", "busy", 0, 0, 12, 13),
		acquire("sup3", "d1", "", 0, 0, 15, -1), // no answer: may be granted any time later
		release("sup1", "d1", "released", 1, 1, 20, 25, 30),
		grant("sup2", "d1", 1, 2, 26, 30),
		release("sup2", "d1", "released", 1, 2, 40, 45, 60),
	}}))
}

// A non-linearizable grant order fails porcupine (and real-time order), and
// the visualization is written.
func TestLinearizableGrantOrderFailsAndVisualizes(t *testing.T) {
	in := Input{
		Ops: []history.Op{
			grant("sup1", "d1", 1, 5, 0, 10),
			grant("sup2", "d1", 1, 4, 20, 30),
			grant("sup3", "d2", 1, 1, 0, 10), // a clean other domain
			event(history.Lost, "sup1", "d1", 1, 5, 15, 12),
			acquire("sup3", "d1", "", 0, 0, 12, -1),
		},
		Faults: []history.Fault{fault("kill", "controller", 11, 11)},
	}
	vs, notes := checkLinearizable(newIndex(in))
	if len(vs) != 1 || len(notes) != 0 {
		t.Fatalf("checkLinearizable = %v, notes %v; want one violation", vs, notes)
	}
	if !containsAll(vs[0].Message, []string{"domain d1", "not linearizable", "first call that cannot be placed: sup2 acquire d1@1.4"}) {
		t.Errorf("message %q", vs[0].Message)
	}
	r := Check(in)
	wantViolation(t, r, I1, "not linearizable")
	wantViolation(t, r, I1, "grant not above an earlier one")
	path := filepath.Join(t.TempDir(), "leases.html")
	if err := WriteLeaseVisualization(in, path); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<html", "acquire(sup2) → granted 1.4", "kill controller", "lost d1@1.5", "acquire d1 (no answer)"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("visualization lacks %q (%d bytes)", want, len(html))
		}
	}
}

// WriteLeaseVisualization reports an unwritable path.
func TestWriteLeaseVisualizationError(t *testing.T) {
	err := WriteLeaseVisualization(Input{Ops: []history.Op{grant("sup1", "d1", 1, 1, 0, 1)}},
		filepath.Join(t.TempDir(), "missing", "x.html"))
	if err == nil {
		t.Fatal("no error for a path in a missing directory")
	}
}

// The model itself: each step as the rule says.
func TestStepLease(t *testing.T) {
	s := grantState{Pos: position{1, 2}, Holder: "a"}
	cases := []struct {
		name string
		in   leaseCall
		out  leaseAnswer
		ok   bool
		next grantState
	}{
		{"higher grant", leaseCall{Kind: history.Acquire, Holder: "b"}, leaseAnswer{Code: "granted", Pos: position{1, 3}}, true, grantState{position{1, 3}, "b"}},
		{"new epoch", leaseCall{Kind: history.Acquire, Holder: "b"}, leaseAnswer{Code: "granted", Pos: position{2, 1}}, true, grantState{position{2, 1}, "b"}},
		{"lower grant", leaseCall{Kind: history.Acquire, Holder: "b"}, leaseAnswer{Code: "granted", Pos: position{1, 1}}, false, s},
		{"equal grant other holder", leaseCall{Kind: history.Acquire, Holder: "b"}, leaseAnswer{Code: "granted", Pos: position{1, 2}}, false, s},
		{"equal grant same holder", leaseCall{Kind: history.Acquire, Holder: "a"}, leaseAnswer{Code: "granted", Pos: position{1, 2}}, false, s},
		{"held", leaseCall{Kind: history.Acquire, Holder: "b"}, leaseAnswer{Code: "held"}, true, s},
		{"unknown", leaseCall{Kind: history.Acquire, Holder: "b"}, leaseAnswer{Unknown: true}, true, s},
		{"release current", leaseCall{Kind: history.Release, Holder: "a", Pos: position{1, 2}}, leaseAnswer{Code: "released"}, true, s},
		{"release superseded", leaseCall{Kind: history.Release, Holder: "c", Pos: position{1, 1}}, leaseAnswer{Code: "released"}, false, s},
		{"release not_holder", leaseCall{Kind: history.Release, Holder: "c", Pos: position{1, 1}}, leaseAnswer{Code: "not_holder"}, true, s},
	}
	for _, c := range cases {
		ok, next := stepLease(s, c.in, c.out)
		if ok != c.ok || (ok && next.(grantState) != c.next) {
			t.Errorf("%s: step = %v, %v; want %v, %v", c.name, ok, next, c.ok, c.next)
		}
	}
	if ok, _ := stepLease(grantState{}, leaseCall{Kind: history.Release}, leaseAnswer{Code: "released"}); ok {
		t.Error("a release answered released before any grant is legal")
	}
}

// Unanswered requests leave porcupine's verdict unchanged and do not make
// a failing search blow up: a history with a hundred of them, and one bad
// release, gets a verdict rather than a timeout note.
func TestLinearizableManyUnansweredGetsVerdict(t *testing.T) {
	in := realistic(400, 2)
	unanswered := 0
	for _, o := range in.Ops {
		if o.Kind == history.Acquire && !o.Answered() {
			unanswered++
		}
	}
	if unanswered < 100 {
		t.Fatalf("only %d unanswered acquires", unanswered)
	}
	vs, notes := checkLinearizable(newIndex(in))
	if len(vs) != 0 || len(notes) != 0 {
		t.Fatalf("clean history: %v, notes %v", vs, notes)
	}
	in.Ops = append(in.Ops, release("sup1", "d1", "released", 1, 1, 10_000_000, 10_000_001, 5))
	vs, notes = checkLinearizable(newIndex(in))
	if len(vs) != 1 || len(notes) != 0 || !strings.Contains(vs[0].Message, "first call that cannot be placed: sup1 release d1@1.1") {
		t.Fatalf("checkLinearizable = %v, notes %v; want the bad release", vs, notes)
	}
}

// A search that runs out of time is a note, not a violation: 26 calls that
// all overlap, then a release porcupine cannot place, cannot be searched in
// a millisecond.
func TestLinearizableTimeoutIsNote(t *testing.T) {
	ops := []history.Op{grant("sup0", "d1", 1, 1, 0, 100)}
	for i := range 25 {
		ops = append(ops, acquire(fmt.Sprintf("w%d", i), "d1", "held", 0, 0, 0, 100))
	}
	ops = append(ops, grant("sup1", "d1", 1, 2, 200, 210), release("sup0", "d1", "released", 1, 1, 300, 310, 50))
	in := Input{Ops: ops, LinearizeTimeout: time.Millisecond}
	vs, notes := checkLinearizable(newIndex(in))
	if len(vs) != 0 || len(notes) != 1 || !strings.Contains(notes[0], "domain d1: linearizability check of 28 acquires and releases timed out after 1ms") {
		t.Fatalf("checkLinearizable = %v, notes %v; want one timeout note", vs, notes)
	}
	r := Check(in)
	if r.Failed(I1) || len(r.Notes) != 1 {
		t.Errorf("Check: violations %v, notes %v", r.Violations, r.Notes)
	}
}
