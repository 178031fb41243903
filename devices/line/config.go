package line

import (
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/transport/serial"
)

// Defaults for Config.
const (
	DefaultTerminator = "\n"
	DefaultMaxLine    = 256
	// DefaultSettle is how long the line must stay silent, after a command
	// got no reply, before the next request is sent.
	DefaultSettle = 200 * time.Millisecond
	// DefaultStringPattern is what a string arg must match when its
	// declaration has no pattern: one word of safe ASCII.
	DefaultStringPattern = `^[A-Za-z0-9._:+-]{1,64}$`
)

// Config configures a line device.
type Config struct {
	// Port is the serial port and its mode; port.path is required.
	Port serial.Config `yaml:"port"`
	// Terminator ends each request: "\n" (default), "\r\n" or "\r".
	// Replies may end in "\n" or "\r\n".
	Terminator string `yaml:"terminator"`
	// MaxLine bounds a request or reply line in bytes. Default 256.
	MaxLine int `yaml:"max_line"`
	// Settle: after a command got no reply in time (in_doubt), the next
	// request waits until the device has sent nothing for this long (what
	// arrives meanwhile is discarded), and its reply is only taken if no
	// second reply follows within this long. Default 200ms; set it above
	// the device's slowest answer.
	Settle time.Duration `yaml:"settle"`
	// CheckEveryReply keeps listening for Settle after every reply, not only
	// after a command that got none: a second reply line then makes the
	// command in_doubt. It catches a device that sometimes answers twice, at
	// the cost of Settle more per command. Default false.
	CheckEveryReply bool `yaml:"check_every_reply"`
	// Ops are the device's operations; at least one.
	Ops []OpConfig `yaml:"ops"`
}

// OpConfig declares one op.
type OpConfig struct {
	// Name is the op name in commands, 1..128 of [A-Za-z0-9._-].
	Name string `yaml:"name"`
	// Request is a text/template rendering the request line from the
	// args (e.g. "SET {{.ch}} {{.value}}"); required. A missing key is an
	// error, not "<no value>".
	Request string `yaml:"request"`
	// OK is a regular expression a success reply matches; required. Its
	// named groups become the output's keys, beside "reply" (the line).
	OK string `yaml:"ok"`
	// Error is a regular expression a device-error reply matches; its
	// group "message", or else the whole line, is the error message.
	// Checked before OK. Empty: no reply is an error reply.
	Error string `yaml:"error"`
	// Args declares the args the op takes; others are refused.
	Args []ArgConfig `yaml:"args"`
	// Timeout bounds waiting for the reply; 0 (default) leaves only the
	// agent's per-device timeout.
	Timeout time.Duration `yaml:"timeout"`
	// Idempotent declares the op may be applied again when in doubt.
	Idempotent bool `yaml:"idempotent"`
}

// ArgConfig declares one arg.
type ArgConfig struct {
	// Name is the arg's key in the command's args and in the template.
	Name string `yaml:"name"`
	// Type: "string" (default), "int", "number" or "bool".
	Type string `yaml:"type"`
	// Optional args may be absent (nil in the template); others must be given.
	Optional bool `yaml:"optional"`
	// Min and Max bound an int or number (inclusive).
	Min *float64 `yaml:"min"`
	Max *float64 `yaml:"max"`
	// Pattern is a regular expression a string must match; default
	// DefaultStringPattern. Control characters are refused regardless.
	Pattern string `yaml:"pattern"`
}

// Validate reports the first invalid value as a *serial.ConfigError whose
// key is relative to the settings ("ops[0].request", "port.baud").
func (c Config) Validate() error {
	_, err := compile(c)
	return err
}

func (c Config) validatePort() error {
	if err := c.Port.Validate(); err != nil {
		return serial.PrefixKey(err, "port.")
	}
	switch {
	case c.Terminator != "" && c.Terminator != "\n" && c.Terminator != "\r\n" && c.Terminator != "\r":
		return &serial.ConfigError{Key: "terminator", Value: fmt.Sprintf("%q", c.Terminator), Reason: `must be "\n", "\r\n" or "\r"`}
	case c.Settle < 0:
		return &serial.ConfigError{Key: "settle", Value: c.Settle, Reason: "must be ≥ 0"}
	case c.MaxLine < 0 || c.MaxLine > 64<<10:
		return &serial.ConfigError{Key: "max_line", Value: c.MaxLine, Reason: "must be in 1..65536"}
	case len(c.Ops) == 0:
		return &serial.ConfigError{Key: "ops", Value: "[]", Reason: "at least one op is required"}
	}
	return nil
}

func checkOpName(key string, op OpConfig, seen map[string]bool) error {
	switch {
	case !fence.ValidID(op.Name):
		return &serial.ConfigError{Key: key + ".name", Value: op.Name, Reason: "must be 1..128 of [A-Za-z0-9._-]"}
	case seen[op.Name]:
		return &serial.ConfigError{Key: key + ".name", Value: op.Name, Reason: "is listed twice"}
	case op.Timeout < 0:
		return &serial.ConfigError{Key: key + ".timeout", Value: op.Timeout, Reason: "must be ≥ 0"}
	}
	seen[op.Name] = true
	return nil
}
