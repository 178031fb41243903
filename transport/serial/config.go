package serial

import (
	"time"

	bug "go.bug.st/serial"
)

// Defaults for Config.
const (
	DefaultBaud         = 115200
	DefaultDataBits     = 8
	DefaultReadTimeout  = 100 * time.Millisecond
	DefaultWriteTimeout = time.Second
	DefaultReopenMin    = 100 * time.Millisecond
	DefaultReopenMax    = 5 * time.Second
)

// Config says which port to open and how. Zero values mean defaults; only
// Path is required.
type Config struct {
	// Path of the device node. Prefer a stable /dev/serial/by-id/… link over
	// /dev/ttyUSB0, whose number changes when devices are replugged.
	Path string `yaml:"path"`
	// Baud rate in bits per second. Default 115200.
	Baud int `yaml:"baud"`
	// DataBits per character, 5..8. Default 8.
	DataBits int `yaml:"data_bits"`
	// Parity: "none" (default), "odd", "even", "mark" or "space".
	Parity string `yaml:"parity"`
	// StopBits: "1" (default), "1.5" or "2".
	StopBits string `yaml:"stop_bits"`
	// ReadTimeout bounds one read; the reader checks for Close this often.
	// Default 100ms.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds one write when the caller's context has no
	// earlier deadline. Default 1s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// ReopenMin and ReopenMax bound the backoff between attempts to reopen
	// a lost port: it starts at ReopenMin and doubles up to ReopenMax.
	// Defaults 100ms and 5s.
	ReopenMin time.Duration `yaml:"reopen_min"`
	ReopenMax time.Duration `yaml:"reopen_max"`
}

var parities = map[string]bug.Parity{
	"none": bug.NoParity, "odd": bug.OddParity, "even": bug.EvenParity,
	"mark": bug.MarkParity, "space": bug.SpaceParity,
}

var stopBits = map[string]bug.StopBits{"1": bug.OneStopBit, "1.5": bug.OnePointFiveStopBits, "2": bug.TwoStopBits}

// WithDefaults returns c with zero values replaced by defaults.
func (c Config) WithDefaults() Config {
	c.Baud = orInt(c.Baud, DefaultBaud)
	c.DataBits = orInt(c.DataBits, DefaultDataBits)
	c.Parity = orString(c.Parity, "none")
	c.StopBits = orString(c.StopBits, "1")
	c.ReadTimeout = orDur(c.ReadTimeout, DefaultReadTimeout)
	c.WriteTimeout = orDur(c.WriteTimeout, DefaultWriteTimeout)
	c.ReopenMin = orDur(c.ReopenMin, DefaultReopenMin)
	c.ReopenMax = orDur(c.ReopenMax, max(DefaultReopenMax, c.ReopenMin))
	return c
}

// Validate reports the first invalid value (defaults applied first) as a
// *ConfigError whose Key is relative to the Config ("baud", "parity", …).
func (c Config) Validate() error {
	d := c.WithDefaults()
	switch {
	case c.Path == "":
		return &ConfigError{"path", c.Path, "is required (e.g. /dev/serial/by-id/usb-…)"}
	case d.Baud < 0 || d.Baud > 16_000_000:
		return &ConfigError{"baud", c.Baud, "must be a baud rate in 1..16000000"}
	case d.DataBits < 5 || d.DataBits > 8:
		return &ConfigError{"data_bits", c.DataBits, "must be 5, 6, 7 or 8"}
	case parities[d.Parity] == 0 && d.Parity != "none":
		return &ConfigError{"parity", c.Parity, "must be none, odd, even, mark or space"}
	case !validStopBits(d.StopBits):
		return &ConfigError{"stop_bits", c.StopBits, "must be 1, 1.5 or 2"}
	}
	return d.validateDurations(c)
}

func validStopBits(s string) bool {
	_, ok := stopBits[s]
	return ok
}

func (d Config) validateDurations(c Config) error {
	switch {
	case c.ReadTimeout < 0:
		return &ConfigError{"read_timeout", c.ReadTimeout, "must be > 0"}
	case c.WriteTimeout < 0:
		return &ConfigError{"write_timeout", c.WriteTimeout, "must be > 0"}
	case c.ReopenMin < 0:
		return &ConfigError{"reopen_min", c.ReopenMin, "must be > 0"}
	case c.ReopenMax < 0 || d.ReopenMax < d.ReopenMin:
		return &ConfigError{"reopen_max", c.ReopenMax, "must be ≥ reopen_min"}
	}
	return nil
}

// mode is c's go.bug.st/serial mode; c must be valid with defaults applied.
func (c Config) mode() *bug.Mode {
	return &bug.Mode{BaudRate: c.Baud, DataBits: c.DataBits, Parity: parities[c.Parity], StopBits: stopBits[c.StopBits]}
}

func orInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func orString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func orDur(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}
