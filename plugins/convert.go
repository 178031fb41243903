package plugins

import (
	"errors"
	"strings"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/plugins/internal/driverpb"
)

func commandToPB(c devices.Command) *driverpb.ApplyRequest {
	t := c.Token
	return &driverpb.ApplyRequest{Id: c.ID, Op: c.Op, Args: c.Args, Token: &driverpb.Token{
		Domain: t.Domain, Epoch: t.Epoch, Seq: t.Seq, Holder: t.Holder, IssuedAtMs: t.IssuedAt,
		TtlMs: t.TTLms, KeyId: t.KeyID[:], Raw: t.Raw,
	}}
}

func commandFromPB(r *driverpb.ApplyRequest) devices.Command {
	c := devices.Command{ID: r.GetId(), Op: r.GetOp()}
	if len(r.GetArgs()) > 0 {
		c.Args = r.GetArgs()
	}
	if t := r.GetToken(); t != nil {
		c.Token = fence.Token{Domain: t.Domain, Epoch: t.Epoch, Seq: t.Seq, Holder: t.Holder,
			IssuedAt: t.IssuedAtMs, TTLms: t.TtlMs, Raw: t.Raw}
		copy(c.Token.KeyID[:], t.KeyId)
	}
	return c
}

func capsToPB(c devices.Capabilities) *driverpb.DescribeResponse {
	r := &driverpb.DescribeResponse{Ops: make(map[string]*driverpb.Op, len(c.Ops)), ChecksTokens: c.ChecksTokens}
	for name, op := range c.Ops {
		r.Ops[name] = &driverpb.Op{Idempotent: op.Idempotent}
	}
	return r
}

func capsFromPB(r *driverpb.DescribeResponse) devices.Capabilities {
	c := devices.Capabilities{Ops: make(map[string]devices.Op, len(r.GetOps())), ChecksTokens: r.GetChecksTokens()}
	for name, op := range r.GetOps() {
		c.Ops[name] = devices.Op{Idempotent: op.GetIdempotent()}
	}
	return c
}

// failureToPB carries err's code, message and fence over the wire; an error
// that is not a *devices.Error travels as device_error.
func failureToPB(err error) *driverpb.Failure {
	f := &driverpb.Failure{Code: string(devices.CodeOf(err)), Message: err.Error()}
	var de *devices.Error
	if errors.As(err, &de) {
		f.Message = de.Message
		if de.Fence != nil {
			f.Fence = &driverpb.Fence{Epoch: de.Fence.Epoch, Seq: de.Fence.Seq, Holder: de.Fence.Holder}
		}
	}
	if len(f.Message) > devices.MaxFailureMessage { // the code and fence must always arrive
		f.Message = strings.ToValidUTF8(f.Message[:devices.MaxFailureMessage], "") + "… (cut)"
	}
	return f
}

// failureFromPB rebuilds the plugin's *devices.Error. An unknown code is
// device_error, keeping the plugin's code in the message.
func failureFromPB(f *driverpb.Failure) *devices.Error {
	code := devices.Code(f.GetCode())
	e := &devices.Error{Code: code, Message: f.GetMessage()}
	if !knownCode(code) {
		e.Code, e.Message = devices.CodeDeviceError, f.GetCode()+": "+f.GetMessage()
	}
	if fp := f.GetFence(); fp != nil {
		e.Fence = &fence.Fence{Epoch: fp.Epoch, Seq: fp.Seq, Holder: fp.Holder}
	}
	return e
}

func knownCode(c devices.Code) bool {
	switch c {
	case devices.CodeDeviceError, devices.CodeDeviceTimeout, devices.CodeDeviceUnavailable,
		devices.CodeUnknownOp, devices.CodeStaleToken, devices.CodeInDoubt, devices.CodeOutputDropped:
		return true
	}
	return false
}
