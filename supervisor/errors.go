package supervisor

import (
	"errors"
	"fmt"

	"github.com/fencegate/fencegate/protocol"
)

// Sentinels for results and lease outcomes; test with errors.Is.
var (
	// ErrStale: a newer lease holds the device (result code stale_token).
	// The lease that sent the command is marked lost.
	ErrStale = errors.New("supervisor: stale token: a newer lease holds the device")
	// ErrInvalidToken: the agent could not verify the token.
	ErrInvalidToken = errors.New("supervisor: invalid token")
	// ErrWrongDomain: the token's domain is not the device's.
	ErrWrongDomain = errors.New("supervisor: wrong domain")
	// ErrBadRequest: the agent or controller refused the request as malformed.
	ErrBadRequest = errors.New("supervisor: bad request")
	// ErrExpired: the command's deadline passed before the device was free.
	ErrExpired = errors.New("supervisor: command deadline passed")
	// ErrUnknownOp: the device has no such op.
	ErrUnknownOp = errors.New("supervisor: unknown op")
	// ErrBusy: the device's queue stayed full until ctx ended, or the
	// controller is at its max_domains (lease code busy); retry later.
	ErrBusy = errors.New("supervisor: device busy")
	// ErrDeviceError, ErrDeviceTimeout, ErrDeviceUnavailable: the device
	// failed; with a timeout it may have acted.
	ErrDeviceError       = errors.New("supervisor: device error")
	ErrDeviceTimeout     = errors.New("supervisor: device timeout")
	ErrDeviceUnavailable = errors.New("supervisor: device unavailable")
	// ErrInDoubt: the agent stopped while applying the command; it may or
	// may not have reached the device, and is not re-applied.
	ErrInDoubt = errors.New("supervisor: command in doubt")
	// ErrInternal: the agent or controller failed internally.
	ErrInternal = errors.New("supervisor: internal error")
	// ErrNoResult: ctx ended before any result arrived; the command may or
	// may not have been applied. Retry with the same id (SendID) to find out.
	ErrNoResult = errors.New("supervisor: no result")

	// ErrHeld: another holder has the lease (and Wait, if any, ran out).
	ErrHeld = errors.New("supervisor: lease held by another holder")
	// ErrLeaseLost: the lease can no longer be trusted to be held: a renewal
	// was refused, none was confirmed within the TTL, a command came back
	// stale, or it was released. Lease.Err wraps the reason.
	ErrLeaseLost = errors.New("supervisor: lease lost")
	// ErrNoAnswer: the controller did not answer before ctx ended.
	ErrNoAnswer = errors.New("supervisor: no answer from the controller")
)

var codeErrors = map[protocol.Code]error{
	protocol.CodeStaleToken: ErrStale, protocol.CodeInvalidToken: ErrInvalidToken, protocol.CodeWrongDomain: ErrWrongDomain,
	protocol.CodeBadRequest: ErrBadRequest, protocol.CodeExpired: ErrExpired, protocol.CodeUnknownOp: ErrUnknownOp,
	protocol.CodeBusy: ErrBusy, protocol.CodeDeviceError: ErrDeviceError, protocol.CodeDeviceTimeout: ErrDeviceTimeout,
	protocol.CodeDeviceUnavailable: ErrDeviceUnavailable, protocol.CodeInDoubt: ErrInDoubt, protocol.CodeInternal: ErrInternal,
}

// ResultError is a result other than applied. It matches the sentinel of
// its code with errors.Is.
type ResultError struct {
	Result protocol.Result
}

func (e *ResultError) Error() string {
	msg := fmt.Sprintf("%s: %s %s", e.Result.Device, e.Result.Status, e.Result.Code)
	if e.Result.Message != "" {
		msg += ": " + e.Result.Message
	}
	return msg
}

// Is reports whether target is the sentinel of the result's code.
func (e *ResultError) Is(target error) bool {
	return codeErrors[e.Result.Code] == target
}

// resultError returns nil for an applied result and a *ResultError otherwise.
func resultError(r protocol.Result) error {
	if r.Status == protocol.StatusApplied {
		return nil
	}
	return &ResultError{Result: r}
}
