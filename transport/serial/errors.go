package serial

import (
	"errors"
	"fmt"
)

// Errors of package serial; returned errors wrap them (test with errors.Is).
var (
	// ErrHeld: another process (a second agent, a stray terminal program)
	// holds the port, by flock or TIOCEXCL.
	ErrHeld = errors.New("serial: port is held by another process")
	// ErrUnavailable: the port is not open (unplugged, or being reopened).
	ErrUnavailable = errors.New("serial: port unavailable")
	// ErrWriteTimeout: a write did not complete before its deadline.
	ErrWriteTimeout = errors.New("serial: write timed out")
	// ErrClosed: the Link or Port was closed.
	ErrClosed = errors.New("serial: closed")
	// ErrGarbage: bytes on the line that do not form a valid line or frame.
	ErrGarbage = errors.New("serial: garbage on the line")
	// ErrBadFrame: a frame that is not valid COBS or fails its CRC.
	ErrBadFrame = errors.New("serial: bad frame")
)

// ConfigError is an invalid Config value, naming its key and value.
type ConfigError struct {
	Key    string // key path, e.g. "port.baud"
	Value  any    // the offending value
	Reason string // what a valid value looks like
}

// PrefixKey puts prefix in front of the key path (devices.KeyPrefixer).
func (e *ConfigError) PrefixKey(prefix string) { e.Key = prefix + e.Key }

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s: value %q: %s", e.Key, fmt.Sprint(e.Value), e.Reason)
}

// PrefixKey puts prefix in front of the key of the *ConfigError in err, if
// any, and returns err: for configurations that embed a serial Config.
func PrefixKey(err error, prefix string) error {
	var ce *ConfigError
	if errors.As(err, &ce) {
		ce.PrefixKey(prefix)
	}
	return err
}
