package simfirmware

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fencegate/fencegate/transport/serial"
)

// handleLine answers one SCPI-like line:
//
//	*IDN?           → FENCEGATE,SIMFW,0,1
//	SET <ch> <v>    → OK          (ch 1..7, v a word; channel 8 is read-only)
//	GET? <ch>       → VAL <ch> <v>
//	PULSE <ch> <ms> → OK          (ms 0..60000, held before the reply)
//	anything else   → ERR <code> <message> (a line of blanks too)
//
// Garbage lines get no answer.
func (fw *firmware) handleLine(m serial.Msg) ([]byte, time.Duration) {
	started := time.Now().UTC()
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.requests++
	if m.Err != nil {
		fw.bad++
		return nil, 0
	}
	reply, hold, applied := fw.lineLocked(strings.Fields(string(m.Data)), started)
	if applied {
		fw.applied++
	}
	return []byte(reply + "\r\n"), hold
}

// lineLocked answers the request line of fields f, taken off the wire at
// started, and reports whether it applied it. fw.mu is held.
func (fw *firmware) lineLocked(f []string, started time.Time) (reply string, hold time.Duration, applied bool) {
	if len(f) == 0 {
		return "ERR -100 empty command", 0, false
	}
	cmd := strings.ToUpper(f[0])
	if cmd == "*IDN?" {
		return "FENCEGATE,SIMFW,0,1", 0, false
	}
	want := map[string]int{"SET": 3, "GET?": 2, "PULSE": 3}[cmd]
	switch {
	case want == 0:
		return fmt.Sprintf("ERR -113 undefined header %q", f[0]), 0, false
	case len(f) != want:
		return fmt.Sprintf("ERR -109 %s takes %d parameters", cmd, want-1), 0, false
	}
	ch, err := strconv.Atoi(f[1])
	if err != nil || ch < 1 || ch > 8 {
		return fmt.Sprintf("ERR -222 channel %q out of range 1..8", f[1]), 0, false
	}
	return fw.lineOpLocked(cmd, f[1], f, started)
}

// lineOpLocked runs the well-formed command cmd on channel ch (fields f),
// logging it first if it applies. fw.mu is held.
func (fw *firmware) lineOpLocked(cmd, ch string, f []string, started time.Time) (string, time.Duration, bool) {
	switch cmd {
	case "SET":
		if ch == "8" {
			return "ERR -221 channel 8 is read-only", 0, false
		}
		if err := fw.logLineLocked(cmd, f, started); err != nil {
			return "ERR -300 " + err.Error(), 0, false
		}
		fw.values["ch"+ch] = json.RawMessage(strconv.Quote(f[2]))
		return "OK", 0, true
	case "GET?":
		v := "0"
		if raw, ok := fw.values["ch"+ch]; ok {
			json.Unmarshal(raw, &v)
		}
		return "VAL " + ch + " " + v, 0, false
	}
	return fw.pulseLocked(f, started)
}

// pulseLocked runs PULSE (fields f), logging it first if its duration is
// in range. fw.mu is held.
func (fw *firmware) pulseLocked(f []string, started time.Time) (string, time.Duration, bool) {
	ms, err := strconv.Atoi(f[2])
	if err != nil || ms < 0 || ms > 60000 {
		return fmt.Sprintf("ERR -222 pulse %q out of range 0..60000", f[2]), 0, false
	}
	if err := fw.logLineLocked("PULSE", f, started); err != nil {
		return "ERR -300 " + err.Error(), 0, false
	}
	return "OK", time.Duration(ms) * time.Millisecond, true
}

// logLineLocked appends the applied command cmd (fields f) to the apply
// log. fw.mu is held.
func (fw *firmware) logLineLocked(cmd string, f []string, started time.Time) error {
	return fw.log.append(lineEntry(cmd, f[1:], started, time.Now().UTC()))
}
