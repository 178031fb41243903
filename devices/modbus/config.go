package modbus

import (
	"fmt"
	"net"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/yamlcfg"
	"github.com/fencegate/fencegate/transport/serial"
)

// Transports.
const (
	RTU = "rtu"
	TCP = "tcp"
)

// Defaults for Config.
const (
	DefaultUnit           = 1
	DefaultRequestTimeout = time.Second
	DefaultQuiet          = 200 * time.Millisecond
	// DefaultMinFrameGap is the least silence that ends an incomplete RTU
	// frame: USB serial adapters hand over a frame in chunks up to 16 ms
	// apart, so the specification's 3.5 character times would cut frames.
	DefaultMinFrameGap    = 20 * time.Millisecond
	DefaultConnectTimeout = 3 * time.Second
	DefaultReconnectMin   = 100 * time.Millisecond
	DefaultReconnectMax   = 5 * time.Second
	DefaultFenceTimeout   = 2 * time.Second
	DefaultFencePoll      = 10 * time.Millisecond
	// Modbus serial line defaults (Modbus over serial line v1.02 §2.5.1):
	// 19200 baud, even parity; 2 stop bits without parity, else 1.
	DefaultBaud   = 19200
	DefaultParity = "even"
)

// Config configures one Modbus device. Transport and Points are required;
// zero values mean defaults.
type Config struct {
	// Transport is "rtu" (a serial line, through transport/serial: an
	// exclusive port, reopened after an unplug) or "tcp".
	Transport string `yaml:"transport"`
	// Unit is the unit identifier: the RTU slave address (1..247) or the
	// MBAP unit id (0..255). Default 1.
	Unit *int `yaml:"unit"`
	// Port is the RTU serial port; port.path is required for rtu. Its
	// defaults are the Modbus serial line's, not transport/serial's: 19200
	// baud, even parity, 1 stop bit (2 with parity none).
	Port serial.Config `yaml:"port"`
	// TCP is the Modbus TCP server; tcp.address is required for tcp.
	TCP TCPConfig `yaml:"tcp"`
	// RequestTimeout bounds the wait for one response. Default 1s. A
	// command's deadline (the agent's per-device timeout) bounds it too.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// Quiet (rtu): after a request that got no valid response, the next
	// request waits until the line has carried no byte for this long, then
	// flushes the port, so that a late response is never taken for the next
	// request's. Default 200ms; set it above the device's slowest response.
	Quiet time.Duration `yaml:"quiet"`
	// FrameGap (rtu): silence that ends an incomplete frame. Default the
	// larger of 3.5 character times and 20ms.
	FrameGap time.Duration `yaml:"frame_gap"`
	// MaxRegisters caps the registers (and, ×16, the coils) of one request
	// below the specification's limits (125 read, 123 written), for devices
	// that take fewer. Default 0: the specification's.
	MaxRegisters int `yaml:"max_registers"`
	// RawOps enables raw_read and raw_write, which address any register or
	// coil by number. Default false: only named points.
	RawOps bool `yaml:"raw_ops"`
	// Points are the device's named points; at least one.
	Points Points `yaml:"points"`
	// Fence configures the PLC-side fence (docs/modbus.md); nil: none.
	Fence *FenceConfig `yaml:"fence_registers"`
}

// TCPConfig configures the connection to a Modbus TCP server.
type TCPConfig struct {
	// Address is host:port (port 502 if omitted).
	Address string `yaml:"address"`
	// ConnectTimeout bounds one connection attempt. Default 3s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// ReconnectMin and ReconnectMax bound the backoff between attempts to
	// reconnect a lost connection. Defaults 100ms and 5s.
	ReconnectMin time.Duration `yaml:"reconnect_min"`
	ReconnectMax time.Duration `yaml:"reconnect_max"`
}

// PointConfig declares one named point.
type PointConfig struct {
	// Table is coil, discrete, input or holding; required.
	Table string `yaml:"table"`
	// Address is the point's first register (or bit), 0..65535, as on the
	// wire (a "40101" in a vendor manual is holding address 100); required.
	Address *int `yaml:"address"`
	// Type: bool (the only type, and the default, of coils and discrete
	// inputs), or uint16 (default), int16, uint32, int32, float32 (32-bit
	// types take two registers).
	Type string `yaml:"type"`
	// WordOrder of 32-bit types: high_first (default) or low_first.
	WordOrder string `yaml:"word_order"`
	// Scale and Offset map the raw value to the engineering value:
	// value = raw × scale + offset. Defaults 1 and 0; scale may not be 0.
	Scale  *float64 `yaml:"scale"`
	Offset float64  `yaml:"offset"`
	// Writable points may be written (coil and holding only). Default false.
	Writable bool `yaml:"writable"`
}

// Points maps point names (1..128 of [A-Za-z0-9._-]) to their
// declarations. In YAML it is a mapping whose entries are decoded strictly
// (an unknown key is an error naming it).
type Points map[string]PointConfig

// UnmarshalYAML decodes a mapping of points, each strictly.
func (ps *Points) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("want a mapping of point names to points")
	}
	out := Points{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		name := n.Content[i].Value
		if _, dup := out[name]; dup {
			return fmt.Errorf("point %q is declared twice", name)
		}
		var pc PointConfig
		if err := yamlcfg.DecodeNode(n.Content[i+1], &pc, name); err != nil {
			return err
		}
		out[name] = pc
	}
	*ps = out
	return nil
}

// Fence layouts.
const (
	// LayoutSeq: four registers, the token's seq as a 64-bit unsigned
	// number, most significant word first.
	LayoutSeq = "seq"
	// LayoutEpochSeq: eight registers, the epoch then the seq, each a
	// 64-bit unsigned number, most significant word first.
	LayoutEpochSeq = "epoch_seq"
)

// FenceConfig configures the PLC-side fence: a block of holding registers
// the driver writes the command's token position into, ahead of (or with)
// every write, and that the PLC compares with the highest it has seen.
type FenceConfig struct {
	// Address is the block's first holding register; required.
	Address *int `yaml:"address"`
	// Layout is seq (default, 4 registers) or epoch_seq (8 registers).
	Layout string `yaml:"layout"`
	// Status, if set, is a holding register the PLC program writes its
	// verdict into (1 accepted, 2 stale) after the driver wrote the fence
	// with the status at 0; the driver then writes values only once
	// accepted. Unset: the PLC (or its Modbus server) refuses a stale fence
	// with an exception, and the fence and adjacent values go in one
	// request.
	Status *int `yaml:"status"`
	// StatusTimeout bounds the wait for the verdict. Default 2s.
	StatusTimeout time.Duration `yaml:"status_timeout"`
	// Poll is the interval between reads of the status. Default 10ms.
	Poll time.Duration `yaml:"poll"`
}

// words is how many registers the layout takes.
func (f FenceConfig) words() int {
	if f.Layout == LayoutEpochSeq {
		return 8
	}
	return 4
}

// Validate reports the first invalid value as a *serial.ConfigError whose
// key is relative to the settings ("points.speed.address", "port.path").
func (c Config) Validate() error {
	_, err := compile(c)
	return err
}

// spec is a compiled Config, with defaults applied.
type spec struct {
	Config
	unit    byte
	points  map[string]Point
	fence   *fenceSpec
	maxRead int // registers per read request; bits are ×16
	maxRegs int // registers per write request
}

// compile validates c and applies its defaults.
func compile(c Config) (*spec, error) {
	s := &spec{Config: c}
	steps := []func() error{s.transport, s.timing, s.limits, s.compilePoints, s.compileFence}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *spec) transport() error {
	lo, hi := 1, 247
	switch s.Transport {
	case RTU:
		if s.TCP != (TCPConfig{}) {
			return &serial.ConfigError{Key: "tcp", Value: s.TCP.Address, Reason: "is for transport tcp; this device's is rtu"}
		}
		if err := s.rtuPort(); err != nil {
			return err
		}
	case TCP:
		if s.Port != (serial.Config{}) {
			return &serial.ConfigError{Key: "port", Value: s.Port.Path, Reason: "is for transport rtu; this device's is tcp"}
		}
		if err := s.tcpConfig(); err != nil {
			return err
		}
		lo, hi = 0, 255
	default:
		return &serial.ConfigError{Key: "transport", Value: s.Transport, Reason: "must be rtu or tcp"}
	}
	u := DefaultUnit
	if s.Unit != nil {
		u = *s.Unit
	}
	if u < lo || u > hi {
		return &serial.ConfigError{Key: "unit", Value: u, Reason: fmt.Sprintf("must be in %d..%d for %s", lo, hi, s.Transport)}
	}
	s.unit = byte(u)
	return nil
}

// rtuPort applies the Modbus serial defaults and validates the port.
func (s *spec) rtuPort() error {
	p := &s.Port
	if p.Baud == 0 {
		p.Baud = DefaultBaud
	}
	if p.Parity == "" {
		p.Parity = DefaultParity
	}
	if p.StopBits == "" {
		p.StopBits = "1"
		if p.Parity == "none" {
			p.StopBits = "2"
		}
	}
	if err := p.Validate(); err != nil {
		return serial.PrefixKey(err, "port.")
	}
	*p = p.WithDefaults()
	return nil
}

func (s *spec) tcpConfig() error {
	t := &s.TCP
	if t.Address == "" {
		return &serial.ConfigError{Key: "tcp.address", Value: "", Reason: "is required (host:port)"}
	}
	if _, _, err := net.SplitHostPort(t.Address); err != nil {
		t.Address = net.JoinHostPort(t.Address, "502")
	}
	if _, port, err := net.SplitHostPort(t.Address); err != nil || port == "" {
		return &serial.ConfigError{Key: "tcp.address", Value: s.TCP.Address, Reason: "must be host:port"}
	}
	t.ConnectTimeout = orDur(t.ConnectTimeout, DefaultConnectTimeout)
	t.ReconnectMin = orDur(t.ReconnectMin, DefaultReconnectMin)
	t.ReconnectMax = orDur(t.ReconnectMax, max(DefaultReconnectMax, t.ReconnectMin))
	for key, d := range map[string]time.Duration{"tcp.connect_timeout": t.ConnectTimeout, "tcp.reconnect_min": t.ReconnectMin} {
		if d < 0 {
			return &serial.ConfigError{Key: key, Value: d, Reason: "must be > 0"}
		}
	}
	if t.ReconnectMax < t.ReconnectMin {
		return &serial.ConfigError{Key: "tcp.reconnect_max", Value: t.ReconnectMax, Reason: "must be ≥ reconnect_min"}
	}
	return nil
}

func (s *spec) timing() error {
	for _, f := range []struct {
		key string
		d   *time.Duration
		def time.Duration
	}{
		{"request_timeout", &s.RequestTimeout, DefaultRequestTimeout},
		{"quiet", &s.Quiet, DefaultQuiet},
		{"frame_gap", &s.FrameGap, s.defaultFrameGap()},
	} {
		if *f.d < 0 {
			return &serial.ConfigError{Key: f.key, Value: *f.d, Reason: "must be > 0"}
		}
		*f.d = orDur(*f.d, f.def)
	}
	return nil
}

func (s *spec) defaultFrameGap() time.Duration {
	if s.Transport != RTU {
		return 0
	}
	return max(DefaultMinFrameGap, InterFrame(s.Port.Baud, s.charTime()))
}

// charTime is one character's time on the RTU line.
func (s *spec) charTime() time.Duration {
	return CharTime(s.Port.Baud, s.Port.DataBits, s.Port.Parity, s.Port.StopBits)
}

func (s *spec) limits() error {
	s.maxRead, s.maxRegs = MaxReadRegisters, MaxWriteRegisters
	switch {
	case s.MaxRegisters < 0 || s.MaxRegisters > MaxReadRegisters:
		return &serial.ConfigError{Key: "max_registers", Value: s.MaxRegisters, Reason: "must be in 1..125"}
	case s.MaxRegisters == 1 && s.has32BitPoint():
		return &serial.ConfigError{Key: "max_registers", Value: s.MaxRegisters, Reason: "must be at least 2: a 32-bit point is written in one request"}
	case s.MaxRegisters > 0:
		s.maxRead, s.maxRegs = s.MaxRegisters, min(s.MaxRegisters, MaxWriteRegisters)
	}
	return nil
}

// has32BitPoint reports whether a point of the config takes two registers.
func (s *spec) has32BitPoint() bool {
	for _, p := range s.Points {
		switch p.Type {
		case TypeUint32, TypeInt32, TypeFloat32:
			return true
		}
	}
	return false
}

func (s *spec) compilePoints() error {
	if len(s.Points) == 0 {
		return &serial.ConfigError{Key: "points", Value: "{}", Reason: "at least one point is required"}
	}
	s.points = make(map[string]Point, len(s.Points))
	for _, name := range sortedNames(s.Points) {
		p, err := compilePoint(name, s.Points[name])
		if err != nil {
			return err
		}
		s.points[name] = p
	}
	return nil
}

func sortedNames(ps Points) []string { return sortedKeys(ps) }

func orDur(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// checkName refuses a point name that is not a valid id.
func checkName(name string) error {
	if !fence.ValidID(name) {
		return &serial.ConfigError{Key: "points." + name, Value: name, Reason: "a point name must be 1..128 of [A-Za-z0-9._-]"}
	}
	return nil
}
