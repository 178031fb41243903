package sim

import (
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// Config configures a simulated device. The zero value is valid: the default
// ops, no latency, no log, no fence file, no injected failures.
type Config struct {
	// Ops lists the device's operations. Empty means DefaultOps: "set",
	// "get" (idempotent) and "pulse". An op named set, get or pulse behaves
	// as described at DefaultOps; any other op accepts any JSON object as
	// args, changes nothing and outputs nothing.
	Ops []OpConfig `yaml:"ops"`
	// Latency is how long an apply takes for ops without their own latency.
	// A duration such as "20ms"; default 0.
	Latency time.Duration `yaml:"latency"`
	// Log is the path of the append-only apply log; empty means no log.
	// Several devices and processes may append to one file.
	Log string `yaml:"log"`
	// FenceFile is the path where the device keeps its highest token per
	// domain, so its check survives restarts; empty means in memory only.
	FenceFile string `yaml:"fence_file"`
	// FailEvery makes every Nth apply that passed the token check fail with
	// device_error; 0 (default) never.
	FailEvery int `yaml:"fail_every"`
	// TimeoutEvery makes every Nth apply that passed the token check block
	// until its context is done and fail with device_timeout; 0 (default)
	// never. When both FailEvery and TimeoutEvery hit, the timeout wins.
	TimeoutEvery int `yaml:"timeout_every"`
	// Unavailable makes every apply fail with device_unavailable.
	Unavailable bool `yaml:"unavailable"`
	// NoFence makes the device check no token, as most hardware does: it
	// trusts the agent's fence alone. It still logs each apply's token (the
	// fault harness uses such devices to see the agent's fence by itself).
	NoFence bool `yaml:"no_fence"`
}

// OpConfig describes one op of a simulated device.
type OpConfig struct {
	// Name is the op name, 1..128 of [A-Za-z0-9._-].
	Name string `yaml:"name"`
	// Idempotent declares that the op may be applied again when in doubt.
	Idempotent bool `yaml:"idempotent"`
	// Latency is how long an apply of this op takes; 0 (default) means
	// Config.Latency.
	Latency time.Duration `yaml:"latency"`
}

// DefaultOps are the ops of a Config without Ops:
//
//   - "set", args {"value": any JSON}: stores the value; output {"value": v}.
//   - "get" (idempotent), no args: output {"value": current}, null before
//     the first set.
//   - "pulse", args {"ms": n}, n an integer in 0..60000: holds for n
//     milliseconds (on top of the latency); output {"pulsed_ms": n}.
func DefaultOps() []OpConfig {
	return []OpConfig{{Name: "set"}, {Name: "get", Idempotent: true}, {Name: "pulse"}}
}

// Validate reports the first invalid value as a *ConfigError naming its key
// and value.
func (c Config) Validate() error {
	if err := validateOps(c.Ops); err != nil {
		return err
	}
	switch {
	case c.Latency < 0:
		return &ConfigError{"latency", c.Latency, "must be ≥ 0"}
	case c.FailEvery < 0:
		return &ConfigError{"fail_every", c.FailEvery, "must be ≥ 0 (0 = never)"}
	case c.TimeoutEvery < 0:
		return &ConfigError{"timeout_every", c.TimeoutEvery, "must be ≥ 0 (0 = never)"}
	case c.Log != "" && c.Log == c.FenceFile:
		return &ConfigError{"fence_file", c.FenceFile, "must differ from log"}
	}
	return nil
}

func validateOps(ops []OpConfig) error {
	seen := make(map[string]bool, len(ops))
	for i, op := range ops {
		key := fmt.Sprintf("ops[%d]", i)
		switch {
		case !fence.ValidID(op.Name):
			return &ConfigError{key + ".name", op.Name, "must be 1..128 of [A-Za-z0-9._-]"}
		case seen[op.Name]:
			return &ConfigError{key + ".name", op.Name, "is listed twice"}
		case op.Latency < 0:
			return &ConfigError{key + ".latency", op.Latency, "must be ≥ 0"}
		}
		seen[op.Name] = true
	}
	return nil
}

// withDefaults returns c with zero values replaced by their defaults.
func (c Config) withDefaults() Config {
	if len(c.Ops) == 0 {
		c.Ops = DefaultOps()
	}
	return c
}
