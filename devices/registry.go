package devices

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/internal/yamlcfg"
)

// Factory opens a driver for one device from its driver settings. It must
// reject unknown or invalid settings (Settings.Decode names the key and
// value). log is the device's logger.
type Factory func(device string, settings Settings, log *slog.Logger) (Driver, error)

// Settings are a device's driver settings as found in the agent config.
type Settings struct {
	Node *yaml.Node // the "settings" mapping; nil if absent
	Path string     // its key path in the config file, for errors
	// Broker is the agent's own MQTT broker URL, for drivers that reach
	// their device over MQTT and have no broker of their own configured.
	Broker string
}

// Decode decodes the settings into out (a pointer to a struct with yaml
// tags), rejecting unknown keys and wrong types with the key path. Absent
// settings leave out unchanged.
func (s Settings) Decode(out any) error {
	if s.Node == nil || s.Node.Kind == 0 {
		return nil
	}
	return yamlcfg.DecodeNode(s.Node, out, s.Path)
}

var (
	registryMu sync.RWMutex // guards registry
	registry   = map[string]Factory{}
)

// Register makes a driver available to agent configs under name. It panics
// if name is taken; call it from an init function.
func Register(name string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("devices: driver " + name + " registered twice")
	}
	registry[name] = f
}

// Open opens the driver called name for device.
func Open(name, device string, settings Settings, log *slog.Logger) (Driver, error) {
	registryMu.RLock()
	f, ok := registry[name]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("driver %q is not one of %v", name, Names())
	}
	return f(device, settings, log)
}

// Names lists the registered drivers, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Validator is a driver configuration that checks itself; its errors name
// keys relative to the driver's settings.
type Validator interface {
	Validate() error
}

// PathValidator is a driver configuration that checks itself and names
// keys under the path it is given ("devices[0].settings").
type PathValidator interface {
	Validate(path string) error
}

// KeyPrefixer is implemented by configuration errors whose key path can be
// made absolute ("latency" → "devices[0].settings.latency").
type KeyPrefixer interface {
	PrefixKey(prefix string)
}

// DecodeValid decodes the settings into cfg (a pointer to a struct with
// yaml tags that is a Validator or a PathValidator) and validates it, so
// that every driver's errors name the key as it stands in the agent's
// config file: a Validator's error that is a KeyPrefixer gets the settings'
// path in front of its key; a PathValidator is given the path ("settings"
// when the settings have none).
func (s Settings) DecodeValid(cfg any) error {
	if err := s.Decode(cfg); err != nil {
		return err
	}
	switch v := cfg.(type) {
	case PathValidator:
		path := s.Path
		if path == "" {
			path = "settings"
		}
		return v.Validate(path)
	case Validator:
		err := v.Validate()
		var kp KeyPrefixer
		if err != nil && s.Path != "" && errors.As(err, &kp) {
			kp.PrefixKey(s.Path + ".")
		}
		return err
	}
	return fmt.Errorf("devices: %T has no Validate method", cfg)
}

// Check checks a device's driver settings without opening anything (no
// port, no connection, no process): decode and validate, as the driver's
// Factory would before it opens the device.
type Check func(settings Settings) error

// checks holds the registered Checks, guarded by registryMu.
var checks = map[string]Check{}

// RegisterCheck registers the settings check of the driver called name.
// It panics if name has one already; call it from an init function.
func RegisterCheck(name string, c Check) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := checks[name]; dup {
		panic("devices: check of driver " + name + " registered twice")
	}
	checks[name] = c
}

// CheckSettings reports whether name is a registered driver and settings
// pass its Check (a driver without one passes). Nothing is opened, so the
// agent can call it before it opens its store or broker.
func CheckSettings(name string, settings Settings) error {
	registryMu.RLock()
	_, ok := registry[name]
	c := checks[name]
	registryMu.RUnlock()
	if !ok {
		return fmt.Errorf("driver %q is not one of %v", name, Names())
	}
	if c == nil {
		return nil
	}
	return c(settings)
}

// DecodeCheck is the Check of a driver whose Factory starts with
// DecodeValid into a new cfg: newConfig returns a pointer to a zero one.
func DecodeCheck(newConfig func() any) Check {
	return func(s Settings) error { return s.DecodeValid(newConfig()) }
}
