package devices

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// Code is a driver failure's wire-level code: protocol v1's result code
// type, so a driver's code is the code the agent answers with.
type Code = protocol.Code

// Failure codes a driver may return (protocol v1's codes, documented here
// for what they mean from a driver).
const (
	// CodeDeviceError: the device answered with an error.
	CodeDeviceError = protocol.CodeDeviceError
	// CodeDeviceTimeout: the deadline passed before the command reached the
	// device, and the driver made sure it never will. A timeout after the
	// command may have left (bytes written, a publish sent) is CodeInDoubt.
	CodeDeviceTimeout = protocol.CodeDeviceTimeout
	// CodeDeviceUnavailable: the device cannot be reached (unplugged,
	// driver process down); the command did not reach it.
	CodeDeviceUnavailable = protocol.CodeDeviceUnavailable
	// CodeUnknownOp: the driver has no such op.
	CodeUnknownOp = protocol.CodeUnknownOp
	// CodeStaleToken: the device's own fence refused the token.
	CodeStaleToken = protocol.CodeStaleToken
	// CodeInDoubt: the command may or may not have taken effect: the driver
	// lost the device mid-command (a plugin crashed or overran), or its
	// deadline passed after the command may have left.
	CodeInDoubt = protocol.CodeInDoubt
)

// CodeOutputDropped is an internal driver code, never on the wire (it is
// not one of protocol v1's codes). It is not a failure: the command took
// effect, but its output was over MaxOutputBytes and was dropped. The agent
// answers it applied/ok with a message and no output. (Reporting it as a
// failure would tell the sender the command did not act, inviting a second
// apply.)
const CodeOutputDropped protocol.Code = "output_dropped"

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

// CodeBadRequest: a command's args are not ones the op takes (wrong type,
// unknown key, out of range). Returned by ArgsChecker.CheckArgs, so the
// agent refuses the command before it is accepted.
const CodeBadRequest = protocol.CodeBadRequest

// BadRequest returns err as a bad_request *Error with err's message (the
// message of its *Error if it has one, so the code is not repeated), or nil
// for a nil err. Drivers' CheckArgs use it on the errors their Apply would
// return for the same args.
func BadRequest(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: CodeBadRequest, Message: MessageOf(err), Err: err}
}

// MessageOf is err's text without the code its *Error puts in front
// ("device_error: port closed" → "port closed"), for a result whose code
// is already that code; the text of any wrapping context is kept. An
// *Error without a message gives "".
func MessageOf(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	s := err.Error()
	if e.Message == "" {
		return strings.TrimSuffix(strings.TrimSuffix(s, string(e.Code)), ": ")
	}
	return strings.Replace(s, string(e.Code)+": "+e.Message, e.Message, 1)
}
