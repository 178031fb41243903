package frame

import (
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/transport/serial"
)

// Config configures a frame device. Port.Path is required; the rest
// defaults.
type Config struct {
	// Port is the serial port and its mode.
	Port serial.Config `yaml:"port"`
	// Ops lists the firmware's operations. Empty means DefaultOps, the
	// reference firmware's: "set", "get" (idempotent) and "pulse".
	Ops []OpConfig `yaml:"ops"`
}

// OpConfig describes one firmware op.
type OpConfig struct {
	// Name is the op name sent to the firmware, 1..128 of [A-Za-z0-9._-].
	Name string `yaml:"name"`
	// Idempotent declares that the op may be applied again when in doubt.
	Idempotent bool `yaml:"idempotent"`
	// Timeout bounds waiting for the firmware's reply; 0 (default) leaves
	// only the agent's per-device timeout.
	Timeout time.Duration `yaml:"timeout"`
}

// DefaultOps are the reference firmware's ops.
func DefaultOps() []OpConfig {
	return []OpConfig{{Name: "set"}, {Name: "get", Idempotent: true}, {Name: "pulse"}}
}

// Validate reports the first invalid value as a *serial.ConfigError whose
// key is relative to the settings ("port.baud", "ops[1].timeout").
func (c Config) Validate() error {
	if err := c.Port.Validate(); err != nil {
		return serial.PrefixKey(err, "port.")
	}
	seen := map[string]bool{}
	for i, op := range c.Ops {
		key := fmt.Sprintf("ops[%d]", i)
		switch {
		case !fence.ValidID(op.Name):
			return &serial.ConfigError{Key: key + ".name", Value: op.Name, Reason: "must be 1..128 of [A-Za-z0-9._-]"}
		case seen[op.Name]:
			return &serial.ConfigError{Key: key + ".name", Value: op.Name, Reason: "is listed twice"}
		case op.Timeout < 0:
			return &serial.ConfigError{Key: key + ".timeout", Value: op.Timeout, Reason: "must be ≥ 0"}
		}
		seen[op.Name] = true
	}
	return nil
}
