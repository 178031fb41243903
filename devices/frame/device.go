package frame

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/transport/serial"
)

func init() {
	devices.Register("frame", factory)
	devices.RegisterCheck("frame", devices.DecodeCheck(func() any { return new(Config) }))
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

// Device drives one device running fencegate firmware protocol v1. It
// implements devices.Driver with the contract documented there (one Apply
// at a time), and devices.AvailabilityReporter.
type Device struct {
	id   string
	ops  map[string]OpConfig
	caps devices.Capabilities
	link *serial.Link
	log  *slog.Logger
	// cut is the frame sent last if it may have been cut short on the
	// wire (no reply came); nil once its reply arrived. Only Apply uses it.
	cut []byte
}

// Open validates cfg and opens the port exclusively. A port held by
// another process is an error (wrapping serial.ErrHeld); a port that is
// absent starts the device unavailable. log may be nil.
func Open(device string, cfg Config, log *slog.Logger) (*Device, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Ops) == 0 {
		cfg.Ops = DefaultOps()
	}
	d := &Device{id: device, ops: map[string]OpConfig{}, log: log,
		caps: devices.Capabilities{Ops: map[string]devices.Op{}, ChecksTokens: true}}
	for _, op := range cfg.Ops {
		d.ops[op.Name] = op
		d.caps.Ops[op.Name] = devices.Op{Idempotent: op.Idempotent}
	}
	link, err := serial.Dial(cfg.Port, serial.NewFrameDecoder(MaxEncoded), log)
	if err != nil {
		return nil, fmt.Errorf("frame: %w", err)
	}
	d.link = link
	return d, nil
}

// Describe returns the configured ops and ChecksTokens = true. Safe to call
// at any time; the caller may modify the map.
func (d *Device) Describe() devices.Capabilities {
	c := d.caps
	c.Ops = maps.Clone(d.caps.Ops)
	return c
}

// OnAvailability implements devices.AvailabilityReporter: handler hears
// when the port is lost and when it is open again.
func (d *Device) OnAvailability(handler func(available bool, reason string)) {
	d.link.OnAvailability(handler)
}

// Close closes the port. Safe to call more than once.
func (d *Device) Close() error { return d.link.Close() }

// request builds the protocol request of cmd.
func request(cmd devices.Command) ([]byte, error) {
	msg, err := Request{ID: cmd.ID, Domain: cmd.Token.Domain, Epoch: cmd.Token.Epoch, Seq: cmd.Token.Seq,
		Holder: cmd.Token.Holder, Op: cmd.Op, Args: cmd.Args}.Marshal()
	if err != nil {
		return nil, devices.Errorf(devices.CodeBadRequest, "command does not fit a protocol v1 frame: %v", err) // nothing was sent
	}
	return serial.EncodeFrame(msg), nil
}

// sendError maps a send that failed before the port took any byte:
// nothing reached the device.
func sendError(err error) error {
	switch {
	case errors.Is(err, serial.ErrWriteTimeout):
		return &devices.Error{Code: devices.CodeDeviceTimeout, Message: "the port did not take the request in time", Err: err}
	default:
		return &devices.Error{Code: devices.CodeDeviceUnavailable, Message: err.Error(), Err: err}
	}
}

// staleError is the firmware's refusal of a token older than its fence.
func staleError(r Reply) error {
	f := fence.Fence{Epoch: r.Epoch, Seq: r.Seq, Holder: r.Holder}
	return &devices.Error{Code: devices.CodeStaleToken, Fence: &f,
		Message: fmt.Sprintf("firmware's own fence is epoch %d seq %d (%s)", r.Epoch, r.Seq, r.Holder)}
}
