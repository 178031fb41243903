package sim

import (
	"errors"
	"fmt"
)

// Errors of package sim. CheckLog's violations wrap ErrTokenBackwards or
// ErrDuplicateApply; ReadLog's parse errors wrap ErrBadLog.
var (
	// ErrTokenBackwards: a device applied a command whose token is older
	// (strictly, by (epoch, seq)) than one it applied before in the domain.
	ErrTokenBackwards = errors.New("sim: token went backwards")
	// ErrDuplicateApply: a device applied a non-idempotent command id twice.
	ErrDuplicateApply = errors.New("sim: command applied twice")
	// ErrBadLog: a whole line of the apply log is not a valid entry.
	ErrBadLog = errors.New("sim: bad apply log line")
)

// ConfigError is an invalid Config value, naming its key path and value.
type ConfigError struct {
	Key    string // key path, e.g. "ops[1].latency" or "devices[0].settings.fail_every"
	Value  any    // the offending value
	Reason string // what a valid value looks like
}

// PrefixKey puts prefix in front of the key path (devices.KeyPrefixer).
func (e *ConfigError) PrefixKey(prefix string) { e.Key = prefix + e.Key }

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s: value %q: %s", e.Key, fmt.Sprint(e.Value), e.Reason)
}
