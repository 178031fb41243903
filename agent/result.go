package agent

import (
	"encoding/json"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// reject builds a rejection of command id carrying the device's fence.
func (d *device) reject(id string, code protocol.Code, msg string) protocol.Result {
	return d.result(id, protocol.StatusRejected, code, msg)
}

func (d *device) result(id string, st protocol.Status, code protocol.Code, msg string) protocol.Result {
	return protocol.Result{ID: id, Device: d.id, Status: st, Code: code, Message: msg,
		Fence: d.fenceView(), At: now()}
}

// fenceView returns the device's current fence for results and state, or
// nil if it has none yet.
func (d *device) fenceView() *fence.Fence {
	tok := d.dom.current()
	if tok.IsZero() {
		return nil
	}
	f := tok.Fence()
	return &f
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// asDuplicate re-encodes a stored result as the answer to a retry.
func asDuplicate(stored []byte) ([]byte, protocol.Code, error) {
	var r protocol.Result
	if err := json.Unmarshal(stored, &r); err != nil {
		return nil, "", err
	}
	r.Duplicate = true
	b, err := json.Marshal(r)
	return b, r.Code, err
}
