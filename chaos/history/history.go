// Package history is the record the fault harness keeps of one schedule:
// what each supervisor asked and was told (Op), and which faults the
// harness injected (Fault), each with real-time start and end. Supervisors
// and the harness append records as JSON lines; the checker (chaos/check)
// reads them back, together with the devices' apply logs (devices/sim.Entry).
//
// Times are wall-clock Unix nanoseconds of one machine: every process of a
// schedule runs on it, so their clocks agree.
package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Kind is what an Op did.
type Kind string

// The kinds of Op.
const (
	Acquire Kind = "acquire" // a lease acquisition (Code granted, held, …)
	Release Kind = "release" // a lease release (Code released, not_holder, …)
	Lost    Kind = "lost"    // the SDK reported the lease lost at End (Start = End)
	Command Kind = "command" // a command to a device (Code: the result's code)
	Held    Kind = "held"    // the lease was still held when the supervisor stopped (Start = End)
)

// Op is one call a supervisor made, or one event it saw.
type Op struct {
	Proc   string `json:"proc"` // the supervisor, e.g. "sup2"
	Kind   Kind   `json:"kind"`
	Domain string `json:"domain"`
	// The lease: for an Acquire the token granted (zero if none), for a
	// Release or Lost the lease's token, for a Command the token it carried.
	Epoch  uint64 `json:"epoch,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Holder string `json:"holder,omitempty"`
	// Command only.
	Device     string          `json:"device,omitempty"`
	ID         string          `json:"id,omitempty"`
	Op         string          `json:"op,omitempty"`
	Idempotent bool            `json:"idempotent,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	// Deadline is the command's deadline_ms as sent (Unix ns; 0: none):
	// an agent that gives up on a command in its driver at this deadline
	// answers in_doubt, with no crash.
	Deadline int64 `json:"deadline,omitempty"`
	// Stale marks a command sent on purpose with a lease its sender knew
	// might be superseded (a holder waking from a stall).
	Stale bool `json:"stale,omitempty"`
	// Start is when the call began, End when its answer arrived; End is 0
	// when no answer came (the outcome is unknown).
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Code is the answer's code ("" without one); Err the client's error.
	Code string `json:"code,omitempty"`
	Err  string `json:"err,omitempty"`
	// ValidUntil, for a Release, Lost or Held op: until when the supervisor
	// held the lease for valid (the SDK's Lease.ValidUntil), Unix ns.
	ValidUntil int64 `json:"valid_until,omitempty"`
	// FenceEpoch, FenceSeq: the fence a stale_token answer showed.
	FenceEpoch uint64 `json:"fence_epoch,omitempty"`
	FenceSeq   uint64 `json:"fence_seq,omitempty"`
}

// Answered reports whether the call got an answer.
func (o Op) Answered() bool { return o.End != 0 && o.Code != "" }

// Fault is one fault the harness injected, from Start until it healed at
// End (End = Start for an instant fault such as a kill).
type Fault struct {
	Kind   string `json:"kind"`   // e.g. "kill", "stop", "partition", "delay", "unplug"
	Target string `json:"target"` // e.g. "agent1", "controller", "sup2", "broker", "fw1"
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	Detail string `json:"detail,omitempty"`
}

// Now is the current time in the unit of Op and Fault.
func Now() int64 { return time.Now().UnixNano() }

// Writer appends records to a file as JSON lines, one write(2) per record,
// so a process stopped or killed at any moment leaves whole lines (except
// possibly part of the last). It is safe for concurrent use.
type Writer struct {
	mu sync.Mutex
	f  *os.File
}

// Create opens path for appending, creating it if needed.
func Create(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &Writer{f: f}, nil
}

// Write appends v (an Op or a Fault) as one line.
func (w *Writer) Write(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// ErrBadLine marks a line that is not a record.
var ErrBadLine = errors.New("history: bad line")

// Read reads the records of type T in path. A last line without a newline
// (cut short by a kill) is ignored; a missing file reads as empty.
func Read[T any](path string) ([]T, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1]
	}
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%w: %s line %d: %w", ErrBadLine, path, n, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}
