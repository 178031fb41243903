package modbus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Table is one of the four Modbus data tables.
type Table string

// The tables, as named in the configuration.
const (
	Coils          Table = "coil"
	DiscreteInputs Table = "discrete"
	InputRegisters Table = "input"
	Holding        Table = "holding"
)

// bits reports whether the table holds bits (coils, discrete inputs).
func (t Table) bits() bool { return t == Coils || t == DiscreteInputs }

// readFunction is the function code that reads the table.
func (t Table) readFunction() byte {
	return map[Table]byte{Coils: FuncReadCoils, DiscreteInputs: FuncReadDiscreteInputs,
		InputRegisters: FuncReadInput, Holding: FuncReadHolding}[t]
}

// Point types, as named in the configuration.
const (
	TypeBool    = "bool"
	TypeUint16  = "uint16"
	TypeInt16   = "int16"
	TypeUint32  = "uint32"
	TypeInt32   = "int32"
	TypeFloat32 = "float32"
)

// Word orders of 32-bit points.
const (
	HighFirst = "high_first" // the register at the point's address holds the high 16 bits
	LowFirst  = "low_first"  // it holds the low 16 bits
)

// errValue: a value a point cannot hold (wrong JSON type, out of range,
// not a multiple of the scale). Messages say which.
var errValue = errors.New("bad value")

// Point is one named point, compiled from its PointConfig: where it lives
// and how its engineering value maps to register words or a bit. The
// methods are pure; a Point is safe for concurrent use.
type Point struct {
	Name     string
	Table    Table
	Address  uint16
	Type     string
	LowFirst bool
	Scale    float64 // never 0
	Offset   float64
	Writable bool
}

// Words is how many registers (or bits) the point occupies.
func (p Point) Words() int {
	if p.Type == TypeUint32 || p.Type == TypeInt32 || p.Type == TypeFloat32 {
		return 2
	}
	return 1
}

// end is the address after the point's last register.
func (p Point) end() int { return int(p.Address) + p.Words() }

// plain reports whether values pass unscaled.
func (p Point) plain() bool { return p.Scale == 1 && p.Offset == 0 }

// EncodeBit returns the coil value raw (a JSON true or false) asks for.
// Anything else — null included, which encoding/json would take as false —
// is refused.
func (p Point) EncodeBit(raw json.RawMessage) (bool, error) {
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%w: point %q takes true or false", errValue, p.Name)
}

// EncodeWords returns the register words that hold the engineering value
// raw (a JSON number): (value − offset) / scale, which must be a whole
// number in the type's range for the integer types (within a relative
// 1e-9, for scales such as 0.1), and finite within float32's range for
// float32.
func (p Point) EncodeWords(raw json.RawMessage) ([]uint16, error) {
	v, err := number(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: point %q takes a number", errValue, p.Name)
	}
	x := (v - p.Offset) / p.Scale
	if p.Type == TypeFloat32 {
		if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > math.MaxFloat32 {
			return nil, fmt.Errorf("%w: point %q: %v is outside float32", errValue, p.Name, v)
		}
		return p.split(math.Float32bits(float32(x))), nil
	}
	n, err := p.whole(v, x)
	if err != nil {
		return nil, err
	}
	if p.Words() == 1 {
		return []uint16{uint16(n)}, nil
	}
	return p.split(uint32(n)), nil
}

// wholeTolerance is how far from a whole number x may be and still count
// as one: the rounding of (value − offset) / scale in float64 (a few ulps
// of x, at least 1e-9 for scales such as 0.1) — far below half a step, so
// 3000000000.5 is refused, never rounded.
func wholeTolerance(x float64) float64 {
	ulp := math.Nextafter(math.Abs(x), math.Inf(1)) - math.Abs(x)
	return math.Max(1e-9, 8*ulp)
}

// whole checks that x (the raw value of v) is a whole number in range.
func (p Point) whole(v, x float64) (int64, error) {
	r := math.Round(x)
	if math.Abs(x-r) > wholeTolerance(x) {
		return 0, fmt.Errorf("%w: point %q: %v is not a whole number of steps of %v", errValue, p.Name, v, p.Scale)
	}
	lo, hi := typeRange(p.Type)
	if r < lo || r > hi {
		return 0, fmt.Errorf("%w: point %q: %v is outside %s (raw %v not in %v..%v)", errValue, p.Name, v, p.Type, r, lo, hi)
	}
	return int64(r), nil
}

func typeRange(typ string) (lo, hi float64) {
	switch typ {
	case TypeInt16:
		return math.MinInt16, math.MaxInt16
	case TypeUint32:
		return 0, math.MaxUint32
	case TypeInt32:
		return math.MinInt32, math.MaxInt32
	}
	return 0, math.MaxUint16
}

// number parses a JSON number (not a string, not a bool).
func number(raw json.RawMessage) (float64, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || !(t[0] == '-' || t[0] >= '0' && t[0] <= '9') {
		return 0, errValue
	}
	var f float64
	if err := json.Unmarshal(t, &f); err != nil {
		return 0, errValue
	}
	return f, nil
}

// split returns the two words of a 32-bit value in the point's word order.
func (p Point) split(v uint32) []uint16 {
	hi, lo := uint16(v>>16), uint16(v)
	if p.LowFirst {
		return []uint16{lo, hi}
	}
	return []uint16{hi, lo}
}

// join is split's inverse.
func (p Point) join(w []uint16) uint32 {
	if p.LowFirst {
		return uint32(w[1])<<16 | uint32(w[0])
	}
	return uint32(w[0])<<16 | uint32(w[1])
}

// DecodeWords returns the engineering value of the point's register words
// (exactly Words() of them) as JSON: an integer for an unscaled integer
// type, otherwise raw × scale + offset rounded to 12 significant digits (a
// float32 unscaled: its shortest decimal form); null for a float32 NaN or
// infinity, which JSON cannot carry.
func (p Point) DecodeWords(w []uint16) json.RawMessage {
	if p.Type == TypeFloat32 {
		f := float64(math.Float32frombits(p.join(w)))
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0):
			return json.RawMessage("null")
		case p.plain():
			return json.RawMessage(strconv.FormatFloat(f, 'g', -1, 32))
		}
		return scaled(f*p.Scale + p.Offset)
	}
	n := p.rawInt(w)
	if p.plain() {
		return json.RawMessage(strconv.FormatInt(n, 10))
	}
	return scaled(float64(n)*p.Scale + p.Offset)
}

// rawInt is the integer the words hold, by type.
func (p Point) rawInt(w []uint16) int64 {
	switch p.Type {
	case TypeInt16:
		return int64(int16(w[0]))
	case TypeUint32:
		return int64(p.join(w))
	case TypeInt32:
		return int64(int32(p.join(w)))
	}
	return int64(w[0])
}

// scaled formats v with 12 significant digits, so that 123 × 0.1 reads
// 12.3; an infinite result (a huge scale) is null.
func scaled(v float64) json.RawMessage {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return json.RawMessage("null")
	}
	s := strconv.FormatFloat(v, 'g', 12, 64)
	f, _ := strconv.ParseFloat(s, 64)
	return json.RawMessage(strconv.FormatFloat(f, 'g', -1, 64))
}

// DecodeBit returns a coil's or discrete input's value as JSON.
func DecodeBit(on bool) json.RawMessage {
	if on {
		return json.RawMessage("true")
	}
	return json.RawMessage("false")
}
