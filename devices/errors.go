package devices

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencegate/fencegate/fence"
)

// Code is a driver failure's wire-level code (protocol v1 result codes).
type Code string

// Failure codes a driver may return.
const (
	// CodeDeviceError: the device answered with an error.
	CodeDeviceError Code = "device_error"
	// CodeDeviceTimeout: the deadline passed before the command reached the
	// device, and the driver made sure it never will. A timeout after the
	// command may have left (bytes written, a publish sent) is CodeInDoubt.
	CodeDeviceTimeout Code = "device_timeout"
	// CodeDeviceUnavailable: the device cannot be reached (unplugged,
	// driver process down); the command did not reach it.
	CodeDeviceUnavailable Code = "device_unavailable"
	// CodeUnknownOp: the driver has no such op.
	CodeUnknownOp Code = "unknown_op"
	// CodeStaleToken: the device's own fence refused the token.
	CodeStaleToken Code = "stale_token"
	// CodeInDoubt: the command may or may not have taken effect: the driver
	// lost the device mid-command (a plugin crashed or overran), or its
	// deadline passed after the command may have left.
	CodeInDoubt Code = "in_doubt"
)

// CodeOutputDropped is not a failure: the command took effect, but its
// output was over MaxOutputBytes and was dropped. The agent answers it
// applied/ok with a message and no output. (Reporting it as a failure
// would tell the sender the command did not act, inviting a second apply.)
const CodeOutputDropped Code = "output_dropped"

// MaxFailureMessage bounds the message of a failure that travels between
// processes (plugins); longer messages are cut, the code and fence kept.
const MaxFailureMessage = 4 << 10

// Error is a driver failure with its wire-level code.
type Error struct {
	Code    Code
	Message string
	// Fence is the device's own highest token, set with CodeStaleToken.
	Fence *fence.Fence
	// Err is the underlying cause, if any.
	Err error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of err: its *Error's code, CodeDeviceTimeout for a
// context deadline, otherwise CodeDeviceError.
func CodeOf(err error) Code {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, context.DeadlineExceeded):
		return CodeDeviceTimeout
	}
	return CodeDeviceError
}
