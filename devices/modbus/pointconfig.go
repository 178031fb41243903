package modbus

import (
	"fmt"
	"math"

	"github.com/fencegate/fencegate/transport/serial"
)

// compilePoint validates one point's declaration and applies its defaults.
func compilePoint(name string, pc PointConfig) (Point, error) {
	if err := checkName(name); err != nil {
		return Point{}, err
	}
	key := "points." + name
	p := Point{Name: name, Table: Table(pc.Table), Type: pc.Type, Scale: 1, Offset: pc.Offset, Writable: pc.Writable}
	if err := p.checkTable(key); err != nil {
		return p, err
	}
	if pc.Address == nil || *pc.Address < 0 || *pc.Address > math.MaxUint16 {
		return p, &serial.ConfigError{Key: key + ".address", Value: fmtPtr(pc.Address), Reason: "is required, 0..65535"}
	}
	p.Address = uint16(*pc.Address)
	if err := p.checkType(key, pc); err != nil {
		return p, err
	}
	if p.end() > math.MaxUint16+1 {
		return p, &serial.ConfigError{Key: key + ".address", Value: p.Address, Reason: "the point's second register is past 65535"}
	}
	return p, p.checkScale(key, pc)
}

func (p *Point) checkTable(key string) error {
	switch p.Table {
	case Coils, Holding:
	case DiscreteInputs, InputRegisters:
		if p.Writable {
			return &serial.ConfigError{Key: key + ".writable", Value: true, Reason: "a " + string(p.Table) + " point is read-only"}
		}
	default:
		return &serial.ConfigError{Key: key + ".table", Value: string(p.Table), Reason: "must be coil, discrete, input or holding"}
	}
	return nil
}

func (p *Point) checkType(key string, pc PointConfig) error {
	if p.Table.bits() {
		if p.Type != "" && p.Type != TypeBool || pc.WordOrder != "" || pc.Scale != nil || pc.Offset != 0 {
			return &serial.ConfigError{Key: key + ".type", Value: p.Type, Reason: "a " + string(p.Table) + " point is a bool: no type, word_order, scale or offset"}
		}
		p.Type = TypeBool
		return nil
	}
	switch p.Type {
	case "":
		p.Type = TypeUint16
	case TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeFloat32:
	default:
		return &serial.ConfigError{Key: key + ".type", Value: p.Type, Reason: "must be uint16, int16, uint32, int32 or float32"}
	}
	switch pc.WordOrder {
	case "", HighFirst:
	case LowFirst:
		p.LowFirst = true
	default:
		return &serial.ConfigError{Key: key + ".word_order", Value: pc.WordOrder, Reason: "must be high_first or low_first"}
	}
	if pc.WordOrder != "" && p.Words() == 1 {
		return &serial.ConfigError{Key: key + ".word_order", Value: pc.WordOrder, Reason: "only 32-bit types have a word order"}
	}
	return nil
}

func (p *Point) checkScale(key string, pc PointConfig) error {
	if pc.Scale != nil {
		p.Scale = *pc.Scale
	}
	switch {
	case p.Scale == 0 || math.IsNaN(p.Scale) || math.IsInf(p.Scale, 0):
		return &serial.ConfigError{Key: key + ".scale", Value: p.Scale, Reason: "must be a finite number other than 0"}
	case math.IsNaN(p.Offset) || math.IsInf(p.Offset, 0):
		return &serial.ConfigError{Key: key + ".offset", Value: p.Offset, Reason: "must be a finite number"}
	}
	return nil
}

func fmtPtr(v *int) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(*v)
}

// fenceSpec is a compiled FenceConfig.
type fenceSpec struct {
	FenceConfig
	addr   uint16
	n      int     // registers of the layout
	status *uint16 // nil: the PLC refuses with an exception
}

func (s *spec) compileFence() error {
	if s.Fence == nil {
		return nil
	}
	f := &fenceSpec{FenceConfig: *s.Fence}
	if err := f.compile(); err != nil {
		return err
	}
	for _, name := range sortedNames(s.Points) {
		if p := s.points[name]; p.Writable && p.Table == Holding && f.overlaps(p) {
			return &serial.ConfigError{Key: "points." + name + ".address", Value: p.Address, Reason: "a writable point may not overlap fence_registers"}
		}
	}
	if f.span() > s.maxRegs {
		// Its first request is one FC 16 of the whole block: a cap below it
		// would refuse every write after the agent accepted it.
		return &serial.ConfigError{Key: "max_registers", Value: s.MaxRegisters,
			Reason: fmt.Sprintf("must be at least the fence block's %d registers", f.span())}
	}
	s.fence = f
	return nil
}

func (f *fenceSpec) compile() error {
	switch f.Layout {
	case "":
		f.Layout = LayoutSeq
	case LayoutSeq, LayoutEpochSeq:
	default:
		return &serial.ConfigError{Key: "fence_registers.layout", Value: f.Layout, Reason: "must be seq or epoch_seq"}
	}
	f.n = f.words()
	if f.Address == nil || *f.Address < 0 || *f.Address+f.n > math.MaxUint16+1 {
		return &serial.ConfigError{Key: "fence_registers.address", Value: fmtPtr(f.Address), Reason: fmt.Sprintf("is required, with room for %d registers below 65536", f.n)}
	}
	f.addr = uint16(*f.Address)
	if err := f.compileStatus(); err != nil {
		return err
	}
	if f.StatusTimeout < 0 || f.Poll < 0 {
		return &serial.ConfigError{Key: "fence_registers.status_timeout", Value: f.StatusTimeout, Reason: "status_timeout and poll must be > 0"}
	}
	f.StatusTimeout = orDur(f.StatusTimeout, DefaultFenceTimeout)
	f.Poll = orDur(f.Poll, DefaultFencePoll)
	return nil
}

// compileStatus requires the status register, if any, right after the
// block, so that the fence and a zeroed status go out in one request.
func (f *fenceSpec) compileStatus() error {
	if f.Status == nil {
		return nil
	}
	if want := int(f.addr) + f.n; *f.Status != want || want > math.MaxUint16 {
		return &serial.ConfigError{Key: "fence_registers.status", Value: *f.Status,
			Reason: fmt.Sprintf("must be the register right after the %d fence registers (%d)", f.n, want)}
	}
	st := uint16(*f.Status)
	f.status = &st
	return nil
}

// span is the registers the driver writes for the fence: the block, and
// the status register after it.
func (f *fenceSpec) span() int {
	if f.status != nil {
		return f.n + 1
	}
	return f.n
}

func (f *fenceSpec) overlaps(p Point) bool { return f.overlapsSpan(int(p.Address), p.Words()) }

// overlapsSpan reports whether n registers from addr touch the fence's.
func (f *fenceSpec) overlapsSpan(addr, n int) bool {
	return addr < int(f.addr)+f.span() && addr+n > int(f.addr)
}
