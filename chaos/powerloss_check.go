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
	"strconv"
	"sync"
	"time"

	"github.com/fencegate/fencegate/devices/sim"
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
				cctx, cancel := context.WithTimeout(ctx, plCheckWait)
				res, _ := c.SendID(cctx, a.ID, a.Token, a.Device, a.Op, a.Args)
				cancel()
				verdict := judgeResend(a, expect, res)
				led.resent(a, res, verdict)
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

func (st *resendStats) count(expect protocol.Code, res protocol.Result, verdict string) {
	switch {
	case res.Code == "" || res.Code == protocol.CodeBusy:
		st.unanswered++
		return
	case verdict != "":
	case res.Code == protocol.CodeInDoubt:
		st.inDoubt++
		if expect != protocol.CodeInDoubt {
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
// failure, in_doubt) must come back the same and marked duplicate, or
// in_doubt. stale_token must come back stale_token: the fence only rises,
// and a command refused as stale was never journaled as accepted. expired
// said the command was not applied: a re-send (with a new deadline) may be
// applied now, but must not find it journaled under another answer (in
// doubt included: the agent once answered a late retry expired while its
// first send was accepted; a retry of a journaled id now gets the journal). An
// idempotent command in doubt is accepted again, so any answer passes.
func judgeResend(a *plAck, expect protocol.Code, res protocol.Result) string {
	if res.Code == "" || res.Code == protocol.CodeBusy {
		return ""
	}
	what := fmt.Sprintf("command %s (%s %s on %s, token %d.%d, answered %s in run %d) sent again after the cut: answered %s (duplicate %v)",
		a.ID, a.Op, argsText(a.Args), a.Device, a.Epoch, a.Seq, expect, a.Round, res.Code, res.Duplicate)
	switch {
	case expect == protocol.CodeExpired:
		if res.Duplicate && res.Code != protocol.CodeExpired {
			return what + ": it had been journaled (accepted before the cut), yet a send of it was answered expired — not applied"
		}
		return ""
	case expect == protocol.CodeStaleToken:
		if res.Code == protocol.CodeStaleToken {
			return ""
		}
		return what + ": a command refused as stale before the cut was taken after it"
	case a.Idempotent && expect == protocol.CodeInDoubt:
		return "" // an idempotent command in doubt is accepted again: any answer
	case res.Code == protocol.CodeInDoubt && !res.Duplicate:
		return what + ": in doubt but not from the journal — the agent forgot the command and took it again"
	case res.Code == protocol.CodeInDoubt && expect == protocol.CodeInDoubt:
		return ""
	case res.Code == protocol.CodeInDoubt:
		return what + ": its result was published before the cut, and the agent makes a result durable before it publishes it — the result was lost"
	case res.Code == expect && res.Duplicate:
		return ""
	case res.Code == protocol.CodeOK && !res.Duplicate:
		return what + ": applied afresh — the journal forgot it"
	}
	return what + ": not its journaled answer — the agent did not know the command"
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
}

func newApplyLogs(devices []string, dir string) *applyLogs {
	return &applyLogs{devices: devices, dir: dir, applied: map[[2]string]map[int64]sim.Entry{}, torn: map[[2]string]bool{}}
}

// scan copies each device's log out of the mount (read(2) only: the
// harness serves the mount) and checks it; when says which copy it is.
func (al *applyLogs) scan(m *lossyfs.Mount, when string, led *ledger) error {
	for _, dev := range al.devices {
		dst := filepath.Join(al.dir, dev+".applies")
		if err := m.CopyOut(dev+".applies", dst); err != nil {
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

// read parses a copied log of device dev: whole lines only. A line that
// starts with a torn write (the kernel splits a write(2) that crosses a
// page boundary, and a torn cut may keep only its first part; the next
// append follows it) is read from where the next entry starts, and counted
// once by its offset (the durable part of a log only grows).
func (al *applyLogs) read(dev, path string) ([]sim.Entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("apply log copy: %w", err)
	}
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
	return out, nil
}

// check adds entries to the union and records what they break.
func (al *applyLogs) check(dev string, entries []sim.Entry, when string, led *ledger) {
	if err := sim.CheckLog(entries); err != nil {
		for _, e := range unjoin(err) {
			if errors.Is(e, sim.ErrTokenBackwards) {
				led.violate(RuleFence, fmt.Sprintf("apply log of %s: %v", dev, e))
			}
		}
	}
	for _, e := range entries {
		if e.Idempotent {
			continue // an idempotent op in doubt may be applied again
		}
		k := [2]string{e.Device, e.ID}
		if al.applied[k] == nil {
			al.applied[k] = map[int64]sim.Entry{}
		}
		at := e.At.UnixNano()
		if _, ok := al.applied[k][at]; ok {
			continue
		}
		al.applied[k][at] = e
		if len(al.applied[k]) == 2 {
			led.violate(RuleApplyLog, fmt.Sprintf("device %s applied command %s (%s %s, token %d.%d) twice: at %s and %s (seen in the log %s)",
				e.Device, e.ID, e.Op, string(e.Args), e.Epoch, e.Seq, stampsOf(al.applied[k])[0], stampsOf(al.applied[k])[1], when))
		}
	}
}

// entries counts the distinct applies seen.
func (al *applyLogs) entries() int {
	n := 0
	for _, m := range al.applied {
		n += len(m)
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
