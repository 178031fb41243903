package modbus

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"

	"github.com/fencegate/fencegate/devices"
)

func init() {
	devices.Register("modbus", factory)
	devices.RegisterCheck("modbus", devices.DecodeCheck(func() any { return new(Config) }))
}

func factory(device string, settings devices.Settings, log *slog.Logger) (devices.Driver, error) {
	var cfg Config
	if err := settings.DecodeValid(&cfg); err != nil {
		return nil, err
	}
	return Open(device, cfg, log)
}

// Op names.
const (
	OpRead     = "read"
	OpWrite    = "write"
	OpRawRead  = "raw_read"
	OpRawWrite = "raw_write"
)

var (
	_ devices.Driver               = (*Device)(nil)
	_ devices.AvailabilityReporter = (*Device)(nil)
)

// Device drives one Modbus device (RTU or TCP). It implements
// devices.Driver with the contract documented there (one Apply at a time)
// and devices.AvailabilityReporter.
type Device struct {
	id   string
	spec *spec
	conn conn
	caps devices.Capabilities
	log  *slog.Logger
}

// Open validates cfg and opens the device: for rtu the port, exclusively
// (a port held by another process is an error wrapping serial.ErrHeld; an
// absent one starts the device unavailable); for tcp a keeper that
// connects in the background. log may be nil.
func Open(device string, cfg Config, log *slog.Logger) (*Device, error) {
	s, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Device{id: device, spec: s, log: log, caps: capabilities(s)}
	if s.Transport == TCP {
		release, err := claimEndpoint(s.TCP.Address, s.unit, device)
		if err != nil {
			return nil, err
		}
		d.conn = &releasing{conn: dialTCP(s, log), release: release}
		return d, nil
	}
	if d.conn, err = dialRTU(s, log); err != nil {
		return nil, err
	}
	return d, nil
}

// capabilities: read and raw_read are idempotent (they change nothing),
// write and raw_write are not — a write that timed out is in_doubt and
// never applied again. ChecksTokens is true with a PLC fence.
func capabilities(s *spec) devices.Capabilities {
	c := devices.Capabilities{Ops: map[string]devices.Op{OpRead: {Idempotent: true}, OpWrite: {}}, ChecksTokens: s.fence != nil}
	if s.RawOps {
		c.Ops[OpRawRead] = devices.Op{Idempotent: true}
		c.Ops[OpRawWrite] = devices.Op{}
	}
	return c
}

// Describe returns the ops; safe to call at any time; the caller may
// modify the map.
func (d *Device) Describe() devices.Capabilities {
	c := d.caps
	c.Ops = maps.Clone(d.caps.Ops)
	return c
}

// OnAvailability implements devices.AvailabilityReporter: for rtu, the
// port lost and reopened; for tcp, a failed connection attempt and the
// next connection.
func (d *Device) OnAvailability(handler func(available bool, reason string)) {
	d.conn.onAvailability(handler)
}

// Close closes the port or connection. Safe to call more than once.
func (d *Device) Close() error { return d.conn.close() }

// Apply runs one command (docs/modbus.md has the whole table):
//
//   - args that name an unknown or read-only point, or a value the point
//     cannot hold → bad_request, nothing sent (CheckArgs);
//   - read: the points' values, scaled; an exception → device_error with
//     its name; no response → device_timeout; port or connection gone →
//     device_unavailable;
//   - write: the fence (if configured) and the values in the documented
//     order; the PLC's fence above the token → stale_token with the PLC's
//     fence, nothing written; an exception before any value was written →
//     device_error; a failure once a request carrying values may have
//     reached the device (no response, a connection lost, a later
//     request refused) → in_doubt, never retried.
func (d *Device) Apply(ctx context.Context, cmd devices.Command) (json.RawMessage, error) {
	c, err := d.parse(cmd.Op, cmd.Args)
	if err != nil {
		return nil, err
	}
	if c.reads != nil {
		return d.read(ctx, c.reads)
	}
	if c.raw != nil {
		return d.rawRead(ctx, *c.raw)
	}
	return nil, d.write(ctx, cmd, c.writes)
}

// CheckArgs reports, without any I/O, whether Apply would refuse op's
// args: an unknown op (unknown_op) or args naming an unknown or read-only
// point, or a value its point cannot hold (bad_request). It is safe to
// call concurrently with Apply, so that a caller can refuse such a
// command before accepting it.
func (d *Device) CheckArgs(op string, args json.RawMessage) error {
	_, err := d.parse(op, args)
	return err
}
