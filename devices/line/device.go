package line

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/transport/serial"
)

func init() {
	devices.Register("line", factory)
	devices.RegisterCheck("line", check)
}

// check decodes and validates the settings and compiles the ops, without
// opening the port.
func check(settings devices.Settings) error {
	var cfg Config
	if err := settings.DecodeValid(&cfg); err != nil {
		return err
	}
	_, err := compile(cfg)
	return err
}

func factory(device string, settings devices.Settings, log *slog.Logger) (devices.Driver, error) {
	var cfg Config
	if err := settings.DecodeValid(&cfg); err != nil {
		return nil, err
	}
	return Open(device, cfg, log)
}

var (
	_ devices.Driver               = (*Device)(nil)
	_ devices.AvailabilityReporter = (*Device)(nil)
)

// Device drives one line-protocol controller. It implements devices.Driver
// with the contract documented there (one Apply at a time) and
// devices.AvailabilityReporter.
type Device struct {
	id      string
	term    string
	maxLine int
	ops     map[string]opSpec
	caps    devices.Capabilities
	link    *serial.Link
	dec     *watched // the link's decoder, for settle
	log     *slog.Logger
	// settleFor is Config.Settle with its default.
	settleFor time.Duration
	// checkEvery is Config.CheckEveryReply.
	checkEvery bool
	// suspect: the last command got no attributable reply, so a late one
	// may still come. Only Apply uses it.
	suspect bool
}

// Open validates cfg and opens the port exclusively. A port held by
// another process is an error (wrapping serial.ErrHeld); an absent port
// starts the device unavailable. log may be nil.
func Open(device string, cfg Config, log *slog.Logger) (*Device, error) {
	ops, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Device{id: device, term: cfg.Terminator, maxLine: cfg.MaxLine, ops: ops, log: log,
		caps: devices.Capabilities{Ops: map[string]devices.Op{}}}
	if d.term == "" {
		d.term = DefaultTerminator
	}
	if d.maxLine == 0 {
		d.maxLine = DefaultMaxLine
	}
	d.settleFor = cmp.Or(cfg.Settle, DefaultSettle)
	d.checkEvery = cfg.CheckEveryReply
	for name, op := range ops {
		d.caps.Ops[name] = devices.Op{Idempotent: op.Idempotent}
	}
	d.dec = &watched{Decoder: serial.NewLineDecoder(d.maxLine)}
	if d.link, err = serial.Dial(cfg.Port, d.dec, log); err != nil {
		return nil, fmt.Errorf("line: %w", err)
	}
	return d, nil
}

// Describe returns the configured ops; ChecksTokens is false. Safe to call
// at any time; the caller may modify the map.
func (d *Device) Describe() devices.Capabilities {
	c := d.caps
	c.Ops = maps.Clone(d.caps.Ops)
	return c
}

// OnAvailability implements devices.AvailabilityReporter.
func (d *Device) OnAvailability(handler func(available bool, reason string)) {
	d.link.OnAvailability(handler)
}

// Close closes the port. Safe to call more than once.
func (d *Device) Close() error { return d.link.Close() }

// sendError maps a send that failed before the port took any byte:
// nothing reached the device.
func sendError(err error) error {
	if errors.Is(err, serial.ErrWriteTimeout) {
		return &devices.Error{Code: devices.CodeDeviceTimeout, Message: "the port did not take the request in time", Err: err}
	}
	return &devices.Error{Code: devices.CodeDeviceUnavailable, Message: err.Error(), Err: err}
}
