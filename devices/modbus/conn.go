package modbus

import (
	"context"

	"github.com/fencegate/fencegate/devices"
)

// conn carries requests to the device, one at a time: the Apply goroutine
// calls roundTrip; onAvailability and close may be called from any
// goroutine, close once, after the last roundTrip returned.
type conn interface {
	// roundTrip sends req and hands each response that may answer it to
	// take, until take returns nil or an *ExceptionError (a response that
	// answers req), which roundTrip returns. take returns a
	// *protocolError for a response that does not answer req. Any other
	// failure is a *linkError saying whether req may have reached the
	// device. ctx bounds the whole exchange.
	roundTrip(ctx context.Context, req PDU, take func(PDU) error) error
	// onAvailability registers a handler for changes of availability
	// (devices.AvailabilityReporter), called from the conn's goroutine.
	onAvailability(handler func(available bool, reason string))
	close() error
}

// linkError is a request that got no response that answers it.
type linkError struct {
	// sent: the request, or part of it, may have reached the device.
	sent bool
	// code is the failure's code when nothing of the command took effect
	// (device_timeout, device_unavailable, device_error).
	code devices.Code
	msg  string
	err  error
}

func (e *linkError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *linkError) Unwrap() error { return e.err }

// notSent is a failure before any byte of the request left.
func notSent(code devices.Code, msg string, err error) *linkError {
	return &linkError{code: code, msg: msg, err: err}
}

// sentLost is a failure after bytes of the request may have left.
func sentLost(code devices.Code, msg string, err error) *linkError {
	return &linkError{sent: true, code: code, msg: msg, err: err}
}
