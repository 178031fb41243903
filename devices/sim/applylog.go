package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// Entry is one line of the apply log: one command a device applied.
type Entry struct {
	Device     string          `json:"device"`
	ID         string          `json:"id"`
	Op         string          `json:"op"`
	Idempotent bool            `json:"idempotent,omitempty"` // the op was declared idempotent
	Domain     string          `json:"domain"`
	Epoch      uint64          `json:"epoch"`
	Seq        uint64          `json:"seq"`
	Holder     string          `json:"holder"`
	Args       json.RawMessage `json:"args,omitempty"` // as received, compacted; absent if none
	Started    time.Time       `json:"started"`        // when the device took the command (after the driver was called)
	At         time.Time       `json:"at"`             // when it was applied
}

// openLog opens the apply log at path for appending, creating it if needed.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open apply log: %w", err)
	}
	return f, nil
}

// appendEntry writes e as one line with a single write(2) on f, opened with
// O_APPEND, so concurrent appenders and a process killed at any moment leave
// whole lines, except possibly part of the last. It does not fsync: the line
// survives a process crash, not a power loss.
func appendEntry(f *os.File, e Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("append apply log: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("append apply log: %w", err)
	}
	return nil
}

// ReadLog reads the apply log at path. A final line without a newline (cut
// short by a crash) is ignored; any other line that is not an entry is an
// error wrapping ErrBadLog.
func ReadLog(path string) ([]Entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read apply log: %w", err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1] // drop the partial last line
	}
	var entries []Entry
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("%w: %s line %d: %w", ErrBadLog, path, n, err)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// CheckLog checks the invariants of an apply log, in order: per device and
// domain, no entry's (epoch, seq) is strictly older than an earlier entry's
// (equal is fine); per device, no command id is applied again by a
// non-idempotent op. It returns nil, or for each device with a violation its
// first one, joined; each wraps ErrTokenBackwards or ErrDuplicateApply.
func CheckLog(entries []Entry) error {
	highest := map[[2]string]Entry{} // (device, domain) → highest entry so far
	applied := map[[2]string]int{}   // (device, id) → index of its first entry
	failed := map[string]bool{}      // devices with a reported violation
	var errs []error
	for i, e := range entries {
		if failed[e.Device] {
			continue
		}
		if err := checkEntry(i, e, highest, applied); err != nil {
			failed[e.Device] = true
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkEntry checks entries[i] = e against the entries before it and
// records it.
func checkEntry(i int, e Entry, highest map[[2]string]Entry, applied map[[2]string]int) error {
	dk, ik := [2]string{e.Device, e.Domain}, [2]string{e.Device, e.ID}
	if h, ok := highest[dk]; ok {
		if fence.ComparePosition(e.Epoch, e.Seq, h.Epoch, h.Seq) < 0 {
			return fmt.Errorf("%w: device %q entry %d (id %q) at %s@%d.%d after %d.%d (id %q)",
				ErrTokenBackwards, e.Device, i, e.ID, e.Domain, e.Epoch, e.Seq, h.Epoch, h.Seq, h.ID)
		}
	}
	if first, ok := applied[ik]; ok && !e.Idempotent {
		return fmt.Errorf("%w: device %q id %q by op %q at entries %d and %d",
			ErrDuplicateApply, e.Device, e.ID, e.Op, first, i)
	}
	highest[dk] = e
	if _, ok := applied[ik]; !ok {
		applied[ik] = i
	}
	return nil
}
