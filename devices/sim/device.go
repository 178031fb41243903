package sim

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
)

func init() {
	devices.Register("sim", factory)
	devices.RegisterCheck("sim", devices.DecodeCheck(func() any { return new(Config) }))
}

// factory opens a sim device from its agent-config settings.
func factory(device string, settings devices.Settings, log *slog.Logger) (devices.Driver, error) {
	var cfg Config
	if err := settings.DecodeValid(&cfg); err != nil {
		return nil, err
	}
	return New(device, cfg, log)
}

var _ devices.Driver = (*Device)(nil)

// Device is a simulated token-aware device controller. It implements
// devices.Driver with the concurrency contract documented there; in
// addition, Describe and Close are safe to call at any time, and concurrent
// Apply calls are safe (each is checked against the fence at commit).
type Device struct {
	id   string
	cfg  Config // defaults applied; read-only after New
	ops  map[string]opSpec
	caps devices.Capabilities // read-only after New
	log  *slog.Logger

	mu       sync.Mutex // guards the fields below
	fences   fences     // highest applied token per domain; replaced, never mutated
	state    state
	attempts int      // applies that passed the token check, for failure injection
	applyLog *os.File // nil if no log or closed
	closed   bool
}

// New opens a simulated device called device. It validates cfg, loads the
// fence file and opens the apply log if configured. log may be nil.
func New(device string, cfg Config, log *slog.Logger) (*Device, error) {
	if err := fence.CheckID("device", device); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Device{id: device, cfg: cfg.withDefaults(), log: log}
	d.ops = newOpSpecs(d.cfg)
	d.caps = capabilities(d.ops, !d.cfg.NoFence)
	if err := d.open(); err != nil {
		return nil, err
	}
	return d, nil
}

// open loads the fence file and opens the apply log.
func (d *Device) open() error {
	fm, err := loadFences(d.cfg.FenceFile)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	d.fences = fm
	if d.cfg.Log != "" {
		if d.applyLog, err = openLog(d.cfg.Log); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
	}
	return nil
}

func capabilities(ops map[string]opSpec, checksTokens bool) devices.Capabilities {
	caps := devices.Capabilities{Ops: make(map[string]devices.Op, len(ops)), ChecksTokens: checksTokens}
	for name, op := range ops {
		caps.Ops[name] = devices.Op{Idempotent: op.idempotent}
	}
	return caps
}

// Describe returns the device's ops and ChecksTokens (false for a NoFence
// device). The caller may modify the returned map. Safe to call concurrently with anything.
func (d *Device) Describe() devices.Capabilities {
	c := d.caps
	c.Ops = maps.Clone(d.caps.Ops)
	return c
}

// Close closes the apply log. Later applies fail with device_unavailable.
// Safe to call concurrently with Apply and more than once.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.applyLog == nil {
		return nil
	}
	err := d.applyLog.Close()
	d.applyLog = nil
	return err
}

// Fence returns the device's own highest applied token in domain, and
// whether it has one.
func (d *Device) Fence(domain string) (fence.Fence, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.fences[domain]
	return f, ok
}
