package plugins

import (
	"encoding/hex"
	"fmt"
	"time"

	"gopkg.in/yaml.v3"
)

// Defaults for Config.
const (
	DefaultStartTimeout      = 10 * time.Second
	DefaultPingInterval      = time.Second
	DefaultRestartBackoff    = 200 * time.Millisecond
	DefaultRestartBackoffMax = 30 * time.Second
	DefaultOverrunGrace      = time.Second
)

// Config is the settings of a device with driver "plugin". Zero values mean
// defaults.
type Config struct {
	// Path is the plugin binary; required.
	Path string `yaml:"path"`
	// Args are passed to the binary.
	Args []string `yaml:"args"`
	// Config is passed to the plugin as YAML text (see DecodeConfig);
	// its shape is the plugin's business.
	Config yaml.Node `yaml:"config"`
	// SHA256 is the binary's expected checksum, 64 hex digits; if set, a
	// binary that does not match is not started (checked at every start).
	SHA256 string `yaml:"sha256"`
	// StartTimeout bounds a start: process launch, handshake and Describe.
	// Default 10 s.
	StartTimeout time.Duration `yaml:"start_timeout"`
	// PingInterval is how often the host asks the plugin for its health.
	// Default 1 s; each ping is bounded by the interval.
	PingInterval time.Duration `yaml:"ping_interval"`
	// RestartBackoff is the delay before the first restart after a crash;
	// it doubles after each failed or short-lived start. Default 200 ms.
	RestartBackoff time.Duration `yaml:"restart_backoff"`
	// RestartBackoffMax caps the delay; a plugin that ran longer than this
	// restarts after RestartBackoff again. Default 30 s.
	RestartBackoffMax time.Duration `yaml:"restart_backoff_max"`
	// OverrunGrace is how long after a command's deadline the host still
	// waits for the plugin's answer. A plugin that has not answered by then
	// is killed (SIGKILL) and restarted, and the command is answered
	// in_doubt. Default 1 s.
	OverrunGrace time.Duration `yaml:"overrun_grace"`
}

// WithDefaults returns c with zero values replaced by their defaults.
func (c Config) WithDefaults() Config {
	c.StartTimeout = orDuration(c.StartTimeout, DefaultStartTimeout)
	c.PingInterval = orDuration(c.PingInterval, DefaultPingInterval)
	c.RestartBackoff = orDuration(c.RestartBackoff, DefaultRestartBackoff)
	c.RestartBackoffMax = orDuration(c.RestartBackoffMax, DefaultRestartBackoffMax)
	c.OverrunGrace = orDuration(c.OverrunGrace, DefaultOverrunGrace)
	return c
}

// Validate reports the first bad value, naming its key under prefix (e.g.
// "devices[0].settings").
func (c Config) Validate(prefix string) error {
	if c.Path == "" {
		return fmt.Errorf("%s.path: missing: the plugin binary to run", prefix)
	}
	if c.SHA256 != "" {
		if b, err := hex.DecodeString(c.SHA256); err != nil || len(b) != 32 {
			return fmt.Errorf("%s.sha256: %q is not 64 hex digits", prefix, c.SHA256)
		}
	}
	for key, d := range map[string]time.Duration{"start_timeout": c.StartTimeout, "ping_interval": c.PingInterval,
		"restart_backoff": c.RestartBackoff, "restart_backoff_max": c.RestartBackoffMax, "overrun_grace": c.OverrunGrace} {
		if d < 0 {
			return fmt.Errorf("%s.%s: %v is negative", prefix, key, d)
		}
	}
	return nil
}

// configText is Config.Config as YAML, "" if absent.
func (c Config) configText() (string, error) {
	if c.Config.Kind == 0 {
		return "", nil
	}
	b, err := yaml.Marshal(&c.Config)
	if err != nil {
		return "", fmt.Errorf("config: %w", err)
	}
	return string(b), nil
}

func orDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
