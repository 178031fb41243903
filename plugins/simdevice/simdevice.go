package simdevice

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/plugins"
)

// Config is the plugin's config.
type Config struct {
	// Device configures the simulated device (devices/sim.Config).
	Device sim.Config `yaml:"device"`
	// PIDFile, if set, receives the plugin's process id at start (replaced
	// atomically), for tests and operators that signal it.
	PIDFile string `yaml:"pid_file"`
}

// DefaultDevice is the device id outside an agent (plugins.Device empty).
const DefaultDevice = "simdevice"

// Main runs the plugin: it decodes the config, opens the simulated device
// and serves it until the agent is done. On a bad config it logs the error
// and exits with status 1.
func Main() {
	log := plugins.Logger()
	d, err := Open(log)
	if err != nil {
		log.Error("simdevice: cannot start", "err", err)
		os.Exit(1)
	}
	plugins.Serve(d)
}

// Open decodes the plugin config from the environment, writes the pid file
// and opens the device, wrapped so that every apply is logged as it starts.
func Open(log *slog.Logger) (devices.Driver, error) {
	var cfg Config
	if err := plugins.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	if cfg.PIDFile != "" {
		if err := writePID(cfg.PIDFile); err != nil {
			return nil, err
		}
	}
	id := plugins.Device()
	if id == "" {
		id = DefaultDevice
	}
	d, err := sim.New(id, cfg.Device, log)
	if err != nil {
		return nil, err
	}
	return Logged(d, log), nil
}

// writePID replaces path with this process's id.
func writePID(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".pid-*")
	if err != nil {
		return fmt.Errorf("pid_file: %w", err)
	}
	_, err = tmp.WriteString(strconv.Itoa(os.Getpid()) + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("pid_file: %w", err)
	}
	return nil
}

// Logged wraps d so that each Apply logs "apply started" (id, op) at Info
// before it runs: tests use the line to act while a command is in flight.
func Logged(d devices.Driver, log *slog.Logger) devices.Driver { return logged{d, log} }

type logged struct {
	devices.Driver
	log *slog.Logger
}

var _ devices.Driver = logged{}

// Apply logs and applies cmd.
func (l logged) Apply(ctx context.Context, cmd devices.Command) (json.RawMessage, error) {
	l.log.Info("apply started", "id", cmd.ID, "op", cmd.Op)
	return l.Driver.Apply(ctx, cmd)
}
