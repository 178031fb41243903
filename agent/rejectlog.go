package agent

import (
	"fmt"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// answerRejected logs a rejection decided against the fence and answers it.
func (d *device) answerRejected(p pending, r protocol.Result) {
	d.logRejected(p, r)
	d.answer(p.replyTo, r)
}

// logRejected logs a rejected command at info: its id, code, the token's
// holder and position, and the fence that refused it (the device logger
// carries the device). A token that did not verify is shown as it claims to
// be, marked unverified; an undecodable one as "".
func (d *device) logRejected(p pending, r protocol.Result) {
	holder, position := p.tok.Holder, ""
	if !p.tok.IsZero() {
		position = p.tok.String()
		if p.unverified {
			holder += " (unverified)"
		}
	} else if t, err := fence.ParseUnverified(p.cmd.Token); err == nil {
		holder, position = t.Holder+" (unverified)", t.String()
	}
	fenceText := "none"
	if r.Fence != nil {
		fenceText = fmt.Sprintf("%d.%d/%s", r.Fence.Epoch, r.Fence.Seq, r.Fence.Holder)
	}
	d.log.Info("command rejected", "id", r.ID, "code", r.Code, "holder", holder, "token", position,
		"fence", fenceText, "message", r.Message)
}
