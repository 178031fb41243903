package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// Rules of the power-loss campaign, as its report names them.
const (
	RuleResend   = "rule 1 (re-send)"   // an answered command sent again gets its answer again, never a fresh apply
	RuleFence    = "rule 2 (fence)"     // no token below an acknowledged one of its domain enters a device
	RuleApplyLog = "rule 3 (apply log)" // no command id applied twice by a device
	RuleRestart  = "restart"            // the agent comes back after every cut
)

// plAck is one command sent to the agent and the answer it got: what the
// power-loss checks hold the agent to.
type plAck struct {
	Sup        string          `json:"sup"`
	ID         string          `json:"id"`
	Device     string          `json:"device"`
	Domain     string          `json:"domain"`
	Op         string          `json:"op"`
	Args       any             `json:"args,omitempty"` // the value given to the SDK, re-sent as it is
	Idempotent bool            `json:"idempotent,omitempty"`
	Token      string          `json:"-"` // the wire token it carried
	Epoch      uint64          `json:"epoch"`
	Seq        uint64          `json:"seq"`
	Holder     string          `json:"holder"`
	Stale      bool            `json:"stale,omitempty"` // sent on purpose under a released lease's token
	Probe      bool            `json:"probe,omitempty"` // a stale-token probe after a restart
	Sent       time.Time       `json:"sent"`            // taken before the first send
	At         time.Time       `json:"at"`              // taken after the answer arrived
	Code       protocol.Code   `json:"code"`
	Duplicate  bool            `json:"duplicate,omitempty"`
	Round      int             `json:"round"`                // the agent's run the answer came in: 1 before the first cut
	Output     json.RawMessage `json:"output,omitempty"`     // the answer's output
	Message    string          `json:"message,omitempty"`    // the answer's message
	Unanswered bool            `json:"unanswered,omitempty"` // the send gave up with no answer
	AgentAt    time.Time       `json:"agent_at,omitempty"`   // the answer's own stamp (Result.At): when the agent gave it

	expect resendExpect // what a re-send must answer; a re-send that legitimately changes it updates it
	resent int
	silent int // re-sends in a row that got no answer to judge
}

// resendExpect is what a re-send of a command must answer: the code, and
// for a journaled answer its output and message, which a duplicate replays.
// A zero code is a command never answered: any first answer is judged on
// its own.
type resendExpect struct {
	code    protocol.Code
	output  json.RawMessage
	message string
}

func expectOf(res protocol.Result) resendExpect {
	return resendExpect{code: res.Code, output: res.Output, message: res.Message}
}

func (a *plAck) pos() [2]uint64 { return [2]uint64{a.Epoch, a.Seq} }

// setToken stamps a with the token t (wire form raw).
func (a *plAck) setToken(t fence.Token, raw string) {
	a.Token, a.Epoch, a.Seq, a.Holder = raw, t.Epoch, t.Seq, t.Holder
}

// entersDriver reports whether an answer means the command was accepted
// past the fence (and may have reached the device): its token raised, or
// was at, the domain's fence.
func entersDriver(c protocol.Code) bool {
	switch c {
	case protocol.CodeOK, protocol.CodeInDoubt, protocol.CodeDeviceError, protocol.CodeDeviceTimeout, protocol.CodeDeviceUnavailable:
		return true
	}
	return false
}

// resendable reports whether an answer binds the agent across a power cut:
// a journaled result (or in_doubt); stale_token, which the fence only
// confirms; and expired, which says the command was not applied (a re-send
// with a new deadline may apply it, but must not find it journaled).
func resendable(c protocol.Code) bool {
	return entersDriver(c) || c == protocol.CodeStaleToken || c == protocol.CodeExpired
}

func before(a, b [2]uint64) bool { return fence.ComparePosition(a[0], a[1], b[0], b[1]) < 0 }

// highStep is a rise of a domain's highest acknowledged token.
type highStep struct {
	at  time.Time
	pos [2]uint64
	id  string
}

// leaseToken is a lease token a supervisor held.
type leaseToken struct {
	pos      [2]uint64
	raw, sup string
}

// plViolation is one broken rule.
type plViolation struct {
	Rule  string
	Round int // the agent's run it was seen in
	Msg   string
}

func (v plViolation) String() string { return v.Rule + ": " + v.Msg }

// ledger is what the supervisors were told and what was found wrong. Its
// methods are safe for concurrent use.
type ledger struct {
	mu         sync.Mutex
	round      int
	acks       []*plAck
	unchecked  []*plAck                            // resendable answers not yet re-sent
	high       map[string][]highStep               // per domain: the highest acknowledged token, rising
	tokens     map[string]map[[2]uint64]leaseToken // per domain: every lease token handed to a supervisor
	violations []plViolation
	seen       map[string]bool // violations already recorded (the apply logs repeat theirs at every cut)
	unanswered int
	starts     []time.Time             // starts[r-2] is when round r began (the agent was dead by then); round 1 from the start
	applied    map[[2]string]time.Time // (device, id) → its first apply seen in the logs (non-idempotent ops)
	out        *json.Encoder           // the run's history: answers and re-sends, one JSON line each
}

func newLedger(history io.Writer) *ledger {
	return &ledger{round: 1, high: map[string][]highStep{}, tokens: map[string]map[[2]uint64]leaseToken{},
		seen: map[string]bool{}, applied: map[[2]string]time.Time{}, out: json.NewEncoder(history)}
}

// nextRound starts the agent's next run (after a cut, the agent dead).
func (l *ledger) nextRound() { l.nextRoundAt(time.Now()) }

// nextRoundAt starts the agent's next run at t (after the last start).
func (l *ledger) nextRoundAt(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.round++
	l.starts = append(l.starts, t)
}

// roundAt returns the round that was running at t.
func (l *ledger) roundAt(t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.roundAtLocked(t)
}

func (l *ledger) roundAtLocked(t time.Time) int {
	return 1 + sort.Search(len(l.starts), func(i int) bool { return t.Before(l.starts[i]) })
}

// startOf returns when round r began (zero for round 1).
func (l *ledger) startOf(r int) time.Time {
	if r < 2 || r-2 >= len(l.starts) {
		return time.Time{}
	}
	return l.starts[r-2]
}

// sawApply records that a device's log shows e applied (non-idempotent
// ops only): an agent that answers the command afresh in a later run
// forgot a command its device had (see checkKnown).
func (l *ledger) sawApply(device, id string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := [2]string{device, id}
	if first, ok := l.applied[k]; !ok || at.Before(first) {
		l.applied[k] = at
	}
}

// agentStamp parses a result's own time stamp; zero if it has none.
func agentStamp(res protocol.Result) time.Time {
	t, err := time.Parse(time.RFC3339Nano, res.At)
	if err != nil {
		return time.Time{}
	}
	return t
}

// addToken remembers a lease token a supervisor was granted.
func (l *ledger) addToken(t fence.Token, raw, sup string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tokens[t.Domain] == nil {
		l.tokens[t.Domain] = map[[2]uint64]leaseToken{}
	}
	p := [2]uint64{t.Epoch, t.Seq}
	l.tokens[t.Domain][p] = leaseToken{pos: p, raw: raw, sup: sup}
}

// answer records a's answer res. One with no code (no answer before the
// send gave up) is counted and kept to be re-sent after the next cut: the
// command may have been accepted, and then the agent must know it. An
// answer that entered the driver with a token below one of its domain
// acknowledged before a was first sent breaks rule 2: the agent had
// durably accepted the higher token.
func (l *ledger) answer(a *plAck, res protocol.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a.At, a.Round = time.Now(), l.round
	if res.Code == "" {
		l.unanswered++
		a.Unanswered = true
		l.unchecked = append(l.unchecked, a)
		l.record("unanswered", a)
		return
	}
	a.Code, a.Duplicate, a.Output, a.Message, a.expect = res.Code, res.Duplicate, res.Output, res.Message, expectOf(res)
	a.AgentAt = agentStamp(res)
	l.checkKnown(a, res, "its answer")
	if entersDriver(a.Code) {
		since, what := a.Sent, "first sent"
		if start := l.startOf(l.roundAtLocked(a.AgentAt)); !res.Duplicate && !a.AgentAt.IsZero() && start.After(since) {
			since, what = start, "taken by the agent restarted" // it had every token acknowledged before the cut
		}
		l.checkFence(a, since, what, a.Code)
		l.raise(a.Domain, a.pos(), a.ID, a.At)
	}
	l.acks = append(l.acks, a)
	if resendable(a.Code) {
		l.unchecked = append(l.unchecked, a)
	}
	l.record("answer", a)
}

func (l *ledger) record(kind string, a *plAck) {
	_ = l.out.Encode(struct {
		Kind string `json:"kind"`
		*plAck
	}{kind, a})
}

// checkKnown records a rule 1 violation if res, an answer to a given by
// the agent (its stamp) in a run after the one whose device applied a (as
// the apply logs show), is not from the journal: the agent forgot a
// command that had reached its device, so the accept was not durable
// before the apply (I3). Idempotent ops are accepted again when in doubt.
func (l *ledger) checkKnown(a *plAck, res protocol.Result, what string) {
	at, ok := l.applied[[2]string{a.Device, a.ID}]
	stamp := agentStamp(res)
	if !ok || a.Idempotent || res.Duplicate || stamp.IsZero() || l.roundAtLocked(stamp) <= l.roundAtLocked(at) {
		return
	}
	l.violateLocked(RuleResend, fmt.Sprintf("command %s (%s on %s, token %d.%d) was applied by its device at %s (run %d), yet %s in run %d was %s, not from the journal: the agent forgot a command its device had",
		a.ID, a.Op, a.Device, a.Epoch, a.Seq, at.Format(time.RFC3339Nano), l.roundAtLocked(at), what, l.roundAtLocked(stamp), res.Code))
}

// checkFence records a rule 2 violation if a, answered code (which entered
// the driver), carries a token below the highest of its domain
// acknowledged before since; what names that moment ("first sent", "re-sent").
func (l *ledger) checkFence(a *plAck, since time.Time, what string, code protocol.Code) {
	h, ok := l.highBefore(a.Domain, since)
	if !ok || !before(a.pos(), h.pos) {
		return
	}
	l.violateLocked(RuleFence, fmt.Sprintf("command %s to %s with token %d.%d (%s), %s %s, answered %s: "+
		"token %d.%d of its domain %s had been acknowledged before (command %s at %s)",
		a.ID, a.Device, a.Epoch, a.Seq, a.Holder, what, stamp(since), code, h.pos[0], h.pos[1], a.Domain, h.id, stamp(h.at)))
}

// raise moves domain's highest acknowledged token to pos (command id,
// acknowledged at), if higher.
func (l *ledger) raise(domain string, pos [2]uint64, id string, at time.Time) {
	steps := l.high[domain]
	if n := len(steps); n > 0 && !before(steps[n-1].pos, pos) {
		return
	}
	if n := len(steps); n > 0 && at.Before(steps[n-1].at) {
		at = steps[n-1].at // the steps stay sorted by time for highBefore
	}
	l.high[domain] = append(steps, highStep{at: at, pos: pos, id: id})
}

// highBefore returns domain's highest token acknowledged before t.
func (l *ledger) highBefore(domain string, t time.Time) (highStep, bool) {
	steps := l.high[domain]
	i := sort.Search(len(steps), func(i int) bool { return !steps[i].at.Before(t) })
	if i == 0 {
		return highStep{}, false
	}
	return steps[i-1], true
}

// highest returns domain's highest acknowledged token so far.
func (l *ledger) highest(domain string) (highStep, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.highBefore(domain, time.Now().Add(time.Hour))
}

// below returns the highest lease token of domain strictly below p.
func (l *ledger) below(domain string, p [2]uint64) (leaseToken, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best leaseToken
	found := false
	for q, t := range l.tokens[domain] {
		if before(q, p) && (!found || before(best.pos, q)) {
			best, found = t, true
		}
	}
	return best, found
}

// resendWindow bounds how far back the older answers re-sent again are
// drawn from: well inside the agent's journal retention (10 000 records a
// device), so none of them can have been pruned.
const resendWindow = 2000

// due returns the commands to re-send after a cut at cutAt: every
// resendable answer, and every command left without an answer, of the
// runs the cut ended (recorded in an earlier round, or before cutAt) that
// was not re-sent yet, and up to sample earlier answers drawn with r (they
// must survive every later cut too). The round, not only the time, decides:
// an answer the agent published just before the cut may reach the
// supervisor a moment after cutAt, and is still the ended run's.
func (l *ledger) due(cutAt time.Time, sample int, r *rand.Rand) []*plAck {
	l.mu.Lock()
	defer l.mu.Unlock()
	var due, later []*plAck
	for _, a := range l.unchecked {
		if a.Round < l.round || a.At.Before(cutAt) || (!a.AgentAt.IsZero() && a.AgentAt.Before(cutAt)) {
			due = append(due, a)
		} else {
			later = append(later, a)
		}
	}
	l.unchecked = later
	recent := l.acks[max(0, len(l.acks)-resendWindow):]
	for range sample {
		if len(recent) == 0 {
			break
		}
		if a := recent[r.IntN(len(recent))]; a.resent > 0 && resendable(a.Code) && !contains(due, a) {
			due = append(due, a)
		}
	}
	return due
}

func contains(s []*plAck, a *plAck) bool {
	for _, b := range s {
		if b == a {
			return true
		}
	}
	return false
}

// expected returns what a re-send of a must answer now.
func (l *ledger) expected(a *plAck) resendExpect {
	l.mu.Lock()
	defer l.mu.Unlock()
	return a.expect
}

// resent records res, the answer to a re-send of a sent at sentAt, and
// verdict, rule 1's ("" if it passed); a passing answer becomes what the
// next re-send must answer. An answer that entered the driver is held to
// rule 2 as well: taken afresh, against the highest token of its domain
// acknowledged before the re-send; from the journal, against the one
// acknowledged before the command was first sent, which is when the agent
// may have taken it (for a command never answered, the first time anyone
// looks).
func (l *ledger) resent(a *plAck, sentAt time.Time, res protocol.Result, verdict string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a.resent++
	if res.Code == "" || res.Code == protocol.CodeBusy {
		l.silentLocked(a)
	} else {
		a.silent = 0
		l.checkKnown(a, res, "the answer to its re-send")
		if entersDriver(res.Code) && !res.Duplicate {
			l.checkFence(a, sentAt, "re-sent", res.Code)
		} else if entersDriver(res.Code) && a.Unanswered {
			l.checkFence(a, a.Sent, "first sent", res.Code) // answered ones were held to it when answered
		}
		if verdict == "" {
			a.expect = expectOf(res)
		}
		if entersDriver(res.Code) {
			l.raise(a.Domain, a.pos(), a.ID, time.Now())
		}
		if verdict == "" && !res.Duplicate && resendable(res.Code) {
			l.answeredAnew(a, res)
		}
	}
	_ = l.out.Encode(map[string]any{"kind": "resend", "id": a.ID, "device": a.Device, "round": l.round,
		"code": res.Code, "duplicate": res.Duplicate, "answered_before": a.Code, "verdict": verdict, "at": stamp(time.Now())})
}

// maxSilentResends is how many re-sends in a row may go without an answer
// to judge (each waits plCheckWait with the agent up) before the checker
// calls it a violation: the agent no longer answers for the command.
const maxSilentResends = 3

// silentLocked keeps a, whose re-send got no answer to judge (none, or
// busy), due after the next cut: its fate is still to be learned.
func (l *ledger) silentLocked(a *plAck) {
	a.silent++
	if a.silent >= maxSilentResends {
		l.violateLocked(RuleResend, fmt.Sprintf("command %s (%s on %s, token %d.%d): %d re-sends in a row got no answer (or busy) from the running agent",
			a.ID, a.Op, a.Device, a.Epoch, a.Seq, a.silent))
		return
	}
	if !contains(l.unchecked, a) {
		l.unchecked = append(l.unchecked, a)
	}
}

// answeredAnew makes res, a fresh answer to a re-send of a, a's answer of
// this run. A command never answered before joins the answers the draw of
// older ones picks from. One that entered the driver now (a never-answered
// command taken now, an expired one applied now) is a result of this run:
// like every result, it must survive the next cut. A fresh stale_token or
// expired binds nothing new (the fence only rises; nothing was applied):
// re-sending it at every cut would only grow the checks.
func (l *ledger) answeredAnew(a *plAck, res protocol.Result) {
	if a.Code == "" {
		a.Code, a.Duplicate = res.Code, res.Duplicate
		l.acks = append(l.acks, a)
	}
	if !entersDriver(res.Code) {
		return
	}
	a.At, a.Round, a.AgentAt = time.Now(), l.round, agentStamp(res)
	if !contains(l.unchecked, a) {
		l.unchecked = append(l.unchecked, a)
	}
}

// violate records a broken rule once.
func (l *ledger) violate(rule, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violateLocked(rule, msg)
}

func (l *ledger) violateLocked(rule, msg string) {
	if l.seen[rule+msg] {
		return
	}
	l.seen[rule+msg] = true
	l.violations = append(l.violations, plViolation{Rule: rule, Round: l.round, Msg: msg})
	_ = l.out.Encode(map[string]any{"kind": "violation", "rule": rule, "round": l.round, "msg": msg})
}

// violationsFrom returns the violations recorded from index i on.
func (l *ledger) violationsFrom(i int) []plViolation {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]plViolation(nil), l.violations[min(i, len(l.violations)):]...)
}

// answersIn counts the answers recorded in round r.
func (l *ledger) answersIn(r int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for i := len(l.acks) - 1; i >= 0 && l.acks[i].Round >= r; i-- {
		if l.acks[i].Round == r {
			n++
		}
	}
	return n
}

// tally adds the answers' counts to s.
func (l *ledger) tally(s *PowerLossSummary) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.acks {
		s.Codes[a.Code]++
		if a.Code != protocol.CodeBusy {
			s.Acked++
		}
		if a.Code == protocol.CodeInDoubt {
			s.InDoubt++
		}
	}
	s.Unanswered = l.unanswered
	for _, v := range l.violations {
		s.Violations[v.Rule]++
	}
}

func stamp(t time.Time) string { return t.Format("15:04:05.000000") }
