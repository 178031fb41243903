package simfirmware

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/fencegate/fencegate/devices/frame"
	"github.com/fencegate/fencegate/devices/sim"
)

// applyLog is the firmware's apply log: devices/sim.Entry lines appended to
// one file. A nil *applyLog logs nothing.
type applyLog struct {
	device string
	f      *os.File
}

// openApplyLog opens path for appending (creating it if needed); an empty
// path is no log.
func openApplyLog(path, device string) (*applyLog, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open apply log: %w", err)
	}
	return &applyLog{device: device, f: f}, nil
}

// append writes e, with the log's device id, as one line with a single
// write(2), so that a process killed at any moment leaves whole lines,
// except possibly part of the last. It does not fsync.
func (l *applyLog) append(e sim.Entry) error {
	if l == nil {
		return nil
	}
	e.Device = l.device
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("append apply log: %w", err)
	}
	if _, err := l.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("append apply log: %w", err)
	}
	return nil
}

// close closes the log file.
func (l *applyLog) close() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}

// frameEntry is the log entry of a frame request applied at now, taken off
// the wire at started.
func frameEntry(req frame.Request, started, now time.Time) sim.Entry {
	args := json.RawMessage(bytes.TrimSpace(req.Args))
	if len(args) == 0 {
		args = nil
	}
	return sim.Entry{ID: req.ID, Op: req.Op, Idempotent: req.Op == "get",
		Domain: req.Domain, Epoch: req.Epoch, Seq: req.Seq, Holder: req.Holder,
		Args: args, Started: started, At: now}
}

// lineEntry is the log entry of a line command (cmd and its parameters)
// applied at now, taken off the wire at started. The line protocol carries
// no id and no token.
func lineEntry(cmd string, params []string, started, now time.Time) sim.Entry {
	args, _ := json.Marshal(params) // strings always marshal
	return sim.Entry{Op: cmd, Args: args, Started: started, At: now}
}
