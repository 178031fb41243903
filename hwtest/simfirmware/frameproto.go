package simfirmware

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/devices/frame"
	"github.com/fencegate/fencegate/transport/serial"
)

// handleFrame answers one frame: a repeated id from the cache, a bad frame
// with nothing (it cannot be attributed), anything else by applying it.
func (fw *firmware) handleFrame(m serial.Msg) ([]byte, time.Duration) {
	started := time.Now().UTC()
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.requests++
	if m.Err != nil {
		fw.bad++
		return nil, 0
	}
	req, err := frame.ParseRequest(m.Data)
	if err != nil {
		fw.bad++
		return nil, 0
	}
	if cached, ok := fw.cache[req.ID]; ok {
		return cached, 0
	}
	rep, hold := fw.applyLocked(req, started)
	rep.ID = req.ID
	msg, err := rep.Marshal()
	if err != nil {
		msg, _ = frame.Reply{ID: req.ID, Status: frame.StatusError, Body: []byte("reply too large")}.Marshal()
	}
	enc := serial.EncodeFrame(msg)
	fw.rememberLocked(req.ID, enc)
	return enc, hold
}

// applyLocked checks the token against the firmware's own fence, raises
// it durably, logs the request (taken off the wire at started) and applies
// the op. fw.mu is held.
func (fw *firmware) applyLocked(req frame.Request, started time.Time) (frame.Reply, time.Duration) {
	if req.Domain == "" || req.Epoch == 0 || req.Seq == 0 {
		return frame.Reply{Status: frame.StatusBadRequest, Body: []byte("missing domain, epoch or seq")}, 0
	}
	f := fw.fences[req.Domain]
	if !f.admits(req.Epoch, req.Seq, req.Holder) {
		return frame.Reply{Status: frame.StatusStale, Epoch: f.Epoch, Seq: f.Seq, Holder: f.Holder}, 0
	}
	run, err := prepare(req.Op, req.Args)
	if err != nil {
		return errReply(req.Op, err), 0
	}
	nf := fenceRec{Epoch: req.Epoch, Seq: req.Seq, Holder: req.Holder}
	if nf != f {
		fw.fences[req.Domain] = nf
		if err := storeFences(fw.o.state, fw.fences); err != nil {
			fw.fences[req.Domain] = f
			return frame.Reply{Status: frame.StatusError, Body: []byte("fence store failed: " + err.Error())}, 0
		}
	}
	if err := fw.log.append(frameEntry(req, started, time.Now().UTC())); err != nil {
		return frame.Reply{Status: frame.StatusError, Body: []byte(err.Error())}, 0
	}
	fw.applied++
	out, hold := run(fw.values)
	return frame.Reply{Status: frame.StatusApplied, Epoch: nf.Epoch, Seq: nf.Seq, Holder: nf.Holder, Body: out}, hold
}

// errUnknownOp marks an op the firmware does not have.
type errUnknownOp string

func (e errUnknownOp) Error() string { return "no op " + string(e) }

func errReply(op string, err error) frame.Reply {
	if _, ok := err.(errUnknownOp); ok {
		return frame.Reply{Status: frame.StatusUnknownOp, Body: []byte(err.Error())}
	}
	return frame.Reply{Status: frame.StatusError, Body: []byte(op + ": " + err.Error())}
}

// prepare validates args for op and returns its effect.
func prepare(op string, args []byte) (func(map[string]json.RawMessage) ([]byte, time.Duration), error) {
	var a map[string]json.RawMessage
	if len(args) > 0 {
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, fmt.Errorf("args are not a JSON object")
		}
	}
	switch op {
	case "set":
		v, ok := a["value"]
		if !ok {
			return nil, fmt.Errorf("args need \"value\"")
		}
		return func(s map[string]json.RawMessage) ([]byte, time.Duration) {
			s["value"] = v
			return object("value", v), 0
		}, nil
	case "get":
		return func(s map[string]json.RawMessage) ([]byte, time.Duration) {
			v, ok := s["value"]
			if !ok {
				v = json.RawMessage("null")
			}
			return object("value", v), 0
		}, nil
	case "pulse":
		return preparePulse(a)
	}
	return nil, errUnknownOp(op)
}

func preparePulse(a map[string]json.RawMessage) (func(map[string]json.RawMessage) ([]byte, time.Duration), error) {
	var ms int
	if err := json.Unmarshal(a["ms"], &ms); err != nil || ms < 0 || ms > 60000 {
		return nil, fmt.Errorf("args need \"ms\", an integer in 0..60000")
	}
	return func(map[string]json.RawMessage) ([]byte, time.Duration) {
		return object("pulsed_ms", json.RawMessage(fmt.Sprint(ms))), time.Duration(ms) * time.Millisecond
	}, nil
}

func object(key string, v json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]json.RawMessage{key: v})
	return b
}
