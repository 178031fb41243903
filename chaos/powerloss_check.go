package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/lossyfs"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
)

// resendSample is how many older answers are re-sent again after each cut,
// besides every answer of the run the cut ended.
const resendSample = 16

// resendWorkers bounds the re-sends in flight at once.
const resendWorkers = 8

// resendStats counts one cut's re-sends.
type resendStats struct {
	sent, same, inDoubt, weakened, unanswered int
}

// resend re-sends through c, with the same id, token, op and args, every
// command of due (ledger.due: answered before the cut) and judges each
// answer (rule 1); it returns once every re-send was answered or gave up.
func resend(ctx context.Context, c *supervisor.Client, led *ledger, due []*plAck) resendStats {
	var (
		mu sync.Mutex
		st resendStats
		wg sync.WaitGroup
	)
	jobs := make(chan *plAck)
	for range resendWorkers {
		wg.Go(func() {
			for a := range jobs {
				expect := led.expected(a)
				sentAt := time.Now()
				cctx, cancel := context.WithTimeout(ctx, plCheckWait)
				res, _ := c.SendID(cctx, a.ID, a.Token, a.Device, a.Op, a.Args)
				cancel()
				verdict := judgeResend(a, expect, res)
				led.resent(a, sentAt, res, verdict)
				if verdict != "" {
					led.violate(RuleResend, verdict)
				}
				mu.Lock()
				st.count(expect, res, verdict)
				mu.Unlock()
			}
		})
	}
	for _, a := range due {
		jobs <- a
	}
	close(jobs)
	wg.Wait()
	return st
}

func (st *resendStats) count(expect resendExpect, res protocol.Result, verdict string) {
	switch {
	case res.Code == "" || res.Code == protocol.CodeBusy:
		st.unanswered++
		return
	case verdict != "":
	case res.Code == protocol.CodeInDoubt:
		st.inDoubt++
		if expect.code != protocol.CodeInDoubt && expect.code != "" { // a never-answered command may well be in doubt
			st.weakened++
		}
	default:
		st.same++
	}
	st.sent++
}

// judgeResend returns why res, the answer to a re-send of a, breaks rule 1
// ("" if it does not, or if there was no answer to judge); expect is what
// the command was answered last. A journaled answer (applied, a device
// failure, in_doubt) must come back the same — code, output and message —
// and marked duplicate, or in_doubt. stale_token must come back
// stale_token: the fence only rises, and a command refused as stale was
// never journaled as accepted. expired said the command was not applied: a
// re-send (with a new deadline) may be applied now, but must not find it
// journaled under another answer (in doubt included: the agent once
// answered a late retry expired while its first send was accepted; a retry
// of a journaled id now gets the journal). An idempotent command in doubt
// is accepted again, so any answer passes. A command never answered may
// have been taken or not: any answer but a fresh in_doubt passes (the
// ledger holds what entered the driver to the fence). Whether a re-send
// taken afresh had a token the fence allowed is rule 2's, in ledger.resent.
func judgeResend(a *plAck, expect resendExpect, res protocol.Result) string {
	if res.Code == "" || res.Code == protocol.CodeBusy {
		return ""
	}
	what := fmt.Sprintf("command %s (%s %s on %s, token %d.%d, answered %s in run %d) sent again after the cut: answered %s (duplicate %v)",
		a.ID, a.Op, argsText(a.Args), a.Device, a.Epoch, a.Seq, codeText(expect.code), a.Round, res.Code, res.Duplicate)
	switch {
	case res.Code == protocol.CodeInDoubt && !res.Duplicate && !(a.Idempotent && expect.code == protocol.CodeInDoubt):
		return what + ": in doubt but not from the journal — the agent forgot the command and took it again"
	case expect.code == "":
		return ""
	case expect.code == protocol.CodeExpired:
		if res.Duplicate && res.Code != protocol.CodeExpired {
			return what + ": it had been journaled (accepted before the cut), yet a send of it was answered expired — not applied"
		}
		return ""
	case expect.code == protocol.CodeStaleToken:
		if res.Code == protocol.CodeStaleToken {
			return ""
		}
		return what + ": a command refused as stale before the cut was taken after it"
	case a.Idempotent && expect.code == protocol.CodeInDoubt:
		return "" // an idempotent command in doubt is accepted again: any answer
	case res.Code == protocol.CodeInDoubt && expect.code == protocol.CodeInDoubt:
		return ""
	case res.Code == protocol.CodeInDoubt:
		return what + ": its result was published before the cut, and the agent makes a result durable before it publishes it — the result was lost"
	case res.Code == expect.code && res.Duplicate:
		if !sameJSON(res.Output, expect.output) || res.Message != expect.message {
			return what + fmt.Sprintf(": the journal replayed output %s and message %q, but %s and %q were published — not the same result",
				outputText(res.Output), res.Message, outputText(expect.output), expect.message)
		}
		return ""
	case res.Code == protocol.CodeOK && !res.Duplicate:
		return what + ": applied afresh — the journal forgot it"
	}
	return what + ": not its journaled answer — the agent did not know the command"
}

func codeText(c protocol.Code) string {
	if c == "" {
		return "nothing"
	}
	return string(c)
}

// sameJSON reports whether a and b hold the same JSON value (either may be
// empty: no output); bytes that are not JSON are compared as they are.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

func outputText(o json.RawMessage) string {
	if len(o) == 0 {
		return "(none)"
	}
	return string(o)
}

func argsText(args any) string {
	if args == nil {
		return "{}"
	}
	b, _ := json.Marshal(args)
	return string(b)
}

// applyLogs reads the devices' apply logs off the mount and checks rule 3
// (and that no device's tokens went backwards, rule 2). Each apply is one
// line stamped with the time it was applied; the union of every copy read
// keeps each (device, id, time) once, so an apply lost from the log by a
// later cut still counts, and two applies of one id are seen even if the
// cut kept only one of them in the file.
type applyLogs struct {
	devices []string
	dir     string                            // where the copies go
	applied map[[2]string]map[int64]sim.Entry // (device, id) → apply time → entry
	torn    map[[2]string]bool                // (device, offset) of each line starting with a torn write
	byTime  map[[2]string][]sim.Entry         // (device, domain) → every distinct apply, by time
	top     map[[2]string]sim.Entry           // (device, domain) → its apply with the highest token
	domain  map[string][]sim.Entry            // domain → per token position, its first apply on any device, by position
}

func newApplyLogs(devices []string, dir string) *applyLogs {
	return &applyLogs{devices: devices, dir: dir, applied: map[[2]string]map[int64]sim.Entry{},
		torn: map[[2]string]bool{}, byTime: map[[2]string][]sim.Entry{}, top: map[[2]string]sim.Entry{}, domain: map[string][]sim.Entry{}}
}

// scan copies each device's log out of the mount (read(2) only: the
// harness serves the mount) and checks it; when says which copy it is.
func (al *applyLogs) scan(m *lossyfs.Mount, when string, led *ledger) error {
	for _, dev := range al.devices {
		dst := filepath.Join(al.dir, logName(dev))
		if err := m.CopyOut(logName(dev), dst); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // nothing applied yet, or its unsynced directory entry was lost
			}
			return err
		}
		entries, err := al.read(dev, dst)
		if err != nil {
			return err
		}
		al.check(dev, entries, when, led)
	}
	return nil
}

// read parses a copied log of device dev (see parse).
func (al *applyLogs) read(dev, path string) ([]sim.Entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("apply log copy: %w", err)
	}
	return al.parse(dev, data), nil
}

// scanCaptured checks the logs as the cut found them (lossyfs
// CutReport.Captured, keyed by logName): every apply until the power went,
// those the cut then lost included.
func (al *applyLogs) scanCaptured(captured map[string][]byte, when string, led *ledger) {
	for _, dev := range al.devices {
		if data, ok := captured[logName(dev)]; ok {
			al.check(dev, al.parse(dev, data), when, led)
		}
	}
}

// logName is the name of device dev's apply log on the mount.
func logName(dev string) string { return dev + ".applies" }

// parse reads whole lines of device dev's log data. A line that starts
// with a torn write (the kernel splits a write(2) that crosses a page
// boundary, and a torn cut may keep only its first part; the next append
// follows it) is read from where the next entry starts, and counted once
// by its offset (the durable part of a log only grows).
func (al *applyLogs) parse(dev string, data []byte) []sim.Entry {
	var out []sim.Entry
	for off := 0; off < len(data); {
		line, _, whole := bytes.Cut(data[off:], []byte("\n"))
		if !whole {
			break // the last line, cut short
		}
		at := off
		off += len(line) + 1
		var e sim.Entry
		if json.Unmarshal(line, &e) == nil {
			out = append(out, e)
			continue
		}
		if i := bytes.LastIndex(line, []byte(`{"device":`)); i > 0 && json.Unmarshal(line[i:], &e) == nil {
			out = append(out, e)
		}
		al.torn[[2]string{dev, strconv.Itoa(at)}] = true
	}
	return out
}

// check adds entries to the union and records what they break: a token
// that went backwards (rule 2), in this copy or across the copies — a cut
// may have lost the line of a higher token applied before, which the
// device had applied all the same — and an id applied twice (rule 3).
func (al *applyLogs) check(dev string, entries []sim.Entry, when string, led *ledger) {
	if err := sim.CheckLog(entries); err != nil {
		for _, e := range unjoin(err) {
			if errors.Is(e, sim.ErrTokenBackwards) {
				led.violate(RuleFence, fmt.Sprintf("apply log of %s: %v", dev, e))
			}
		}
	}
	for _, e := range entries {
		k := [2]string{e.Device, e.ID}
		if al.applied[k] == nil {
			al.applied[k] = map[int64]sim.Entry{}
		}
		at := e.At.UnixNano()
		if _, ok := al.applied[k][at]; ok {
			continue
		}
		al.applied[k][at] = e
		al.order(e, when, led)
		al.orderDomain(e, when, led)
		if e.Idempotent {
			al.reapplied(k, e, when, led)
			continue
		}
		led.sawApply(e.Device, e.ID, e.At)
		if al.applies(k) == 2 {
			ats := stampsOf(al.applied[k])
			led.violate(RuleApplyLog, fmt.Sprintf("device %s applied command %s (%s %s, token %d.%d) twice: at %s and %s (seen in the log %s)",
				e.Device, e.ID, e.Op, string(e.Args), e.Epoch, e.Seq, ats[0], ats[1], when))
		}
	}
}

// applies counts the distinct applies of (device, id) k that count for
// rule 3: an idempotent op in doubt may be applied again.
func (al *applyLogs) applies(k [2]string) int {
	n := 0
	for _, e := range al.applied[k] {
		if !e.Idempotent {
			n++
		}
	}
	return n
}

// order files e, an apply seen for the first time, among its device's and
// domain's applies by time, and records a rule 2 violation if an apply
// before it had a higher token or one after it a lower token. Copies
// arrive in time order, so e is nearly always the latest: one comparison
// with the highest token so far.
func (al *applyLogs) order(e sim.Entry, when string, led *ledger) {
	k := [2]string{e.Device, e.Domain}
	list := al.byTime[k]
	i := sort.Search(len(list), func(i int) bool { return e.At.Before(list[i].At) })
	top, had := al.top[k]
	if !had || fence.ComparePosition(e.Epoch, e.Seq, top.Epoch, top.Seq) > 0 {
		al.top[k] = e
	}
	if i == len(list) {
		al.byTime[k] = append(list, e)
		if had && fence.ComparePosition(top.Epoch, top.Seq, e.Epoch, e.Seq) > 0 {
			al.backwards(top, e, when, led)
		}
		return
	}
	list = append(list, sim.Entry{})
	copy(list[i+1:], list[i:])
	list[i] = e
	al.byTime[k] = list
	for j, o := range list {
		earlierHigher := j < i && fence.ComparePosition(o.Epoch, o.Seq, e.Epoch, e.Seq) > 0
		laterLower := j > i && fence.ComparePosition(o.Epoch, o.Seq, e.Epoch, e.Seq) < 0
		switch {
		case earlierHigher:
			al.backwards(o, e, when, led)
			return
		case laterLower:
			al.backwards(e, o, when, led)
			return
		}
	}
}

// reapplied records a rule 3 violation if e, an idempotent op, was
// applied before in the same run of the agent: an op is in doubt, and may
// be applied again, only after a restart.
func (al *applyLogs) reapplied(k [2]string, e sim.Entry, when string, led *ledger) {
	r := led.roundAt(e.At)
	for at, o := range al.applied[k] {
		if at != e.At.UnixNano() && led.roundAt(o.At) == r {
			ats := stampsOf(map[int64]sim.Entry{at: o, e.At.UnixNano(): e})
			led.violate(RuleApplyLog, fmt.Sprintf("device %s applied idempotent command %s (%s, token %d.%d) twice in run %d, with no restart between: at %s and %s (seen in the log %s)",
				e.Device, e.ID, e.Op, e.Epoch, e.Seq, r, ats[0], ats[1], when))
			return
		}
	}
}

// domainSlack is how long after a higher token's apply (on any device of
// the domain) a lower one may still start on another device: the agent
// checks the domain fence just before the driver, and the two are not one
// atomic step, so a stalled worker may start a command a moment after
// another device applied a higher token. Beyond it, the check was skipped.
const domainSlack = time.Second

// orderDomain records a rule 2 violation if e started more than
// domainSlack after an apply of a higher token of its domain, on any
// device: the domain's fence had been raised (durably, before that apply)
// and e's token was below it when its worker checked.
func (al *applyLogs) orderDomain(e sim.Entry, when string, led *ledger) {
	list := al.domain[e.Domain]
	i := sort.Search(len(list), func(i int) bool {
		return fence.ComparePosition(list[i].Epoch, list[i].Seq, e.Epoch, e.Seq) >= 0
	})
	if i < len(list) && list[i].Epoch == e.Epoch && list[i].Seq == e.Seq {
		if e.At.Before(list[i].At) {
			list[i] = e
		}
		i++
	} else {
		list = append(list, sim.Entry{})
		copy(list[i+1:], list[i:])
		list[i] = e
		al.domain[e.Domain] = list
		i++
	}
	for _, h := range list[i:] { // the higher positions: few, the load's current leases
		if started := startOf(e); started.After(h.At.Add(domainSlack)) {
			led.violate(RuleFence, fmt.Sprintf("domain %s: device %s applied %s at %d.%d (at %s), and %s later device %s started %s at %d.%d (at %s): its worker let a token below the domain's fence through (seen in the log %s)",
				e.Domain, h.Device, h.ID, h.Epoch, h.Seq, h.At.Format(time.RFC3339Nano), started.Sub(h.At).Round(time.Millisecond), e.Device, e.ID, e.Epoch, e.Seq, started.Format(time.RFC3339Nano), when))
			return
		}
	}
}

// startOf returns when e's apply started (its end if the log has no start).
func startOf(e sim.Entry) time.Time {
	if e.Started.IsZero() {
		return e.At
	}
	return e.Started
}

func (al *applyLogs) backwards(hi, lo sim.Entry, when string, led *ledger) {
	led.violate(RuleFence, fmt.Sprintf("device %s applied %s at %d.%d (%s, at %s), then %s at %d.%d (%s, at %s) in domain %s: its token went backwards (seen in the log %s)",
		hi.Device, hi.ID, hi.Epoch, hi.Seq, hi.Holder, hi.At.Format(time.RFC3339Nano), lo.ID, lo.Epoch, lo.Seq, lo.Holder, lo.At.Format(time.RFC3339Nano), hi.Domain, when))
}

// entries counts the distinct applies of non-idempotent ops seen.
func (al *applyLogs) entries() int {
	n := 0
	for k := range al.applied {
		n += al.applies(k)
	}
	return n
}

func stampsOf(m map[int64]sim.Entry) []string {
	var ts []time.Time
	for _, e := range m {
		ts = append(ts, e.At)
	}
	if len(ts) == 2 && ts[1].Before(ts[0]) {
		ts[0], ts[1] = ts[1], ts[0]
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Format(time.RFC3339Nano)
	}
	return out
}

// unjoin splits an errors.Join error into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// snapshot copies every regular file of the mount to dst (read(2) only),
// to keep the state a cut left for a look after a violation.
func snapshot(m *lossyfs.Mount, dst string) error {
	return filepath.WalkDir(m.Dir(), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, rerr := filepath.Rel(m.Dir(), path)
		if rerr != nil {
			return rerr
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return m.CopyOut(rel, filepath.Join(dst, rel))
	})
}
