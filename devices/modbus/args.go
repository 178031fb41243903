package modbus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/protocol"
)

// parsed is a command's args, checked: exactly one field is set.
type parsed struct {
	reads  []Point   // read
	raw    *readRun  // raw_read
	writes *writeSet // write, raw_write
}

// parse checks op and its args against the configuration; it does no I/O
// and reads only the immutable spec.
func (d *Device) parse(op string, args json.RawMessage) (parsed, error) {
	if _, ok := d.caps.Ops[op]; !ok {
		return parsed{}, devices.Errorf(devices.CodeUnknownOp, "device %q has no op %q", d.id, op)
	}
	var p parsed
	var err error
	switch op {
	case OpRead:
		p.reads, err = d.parseRead(args)
	case OpWrite:
		p.writes, err = d.parseWrite(args)
	case OpRawRead:
		p.raw, err = d.parseRawRead(args)
	default:
		p.writes, err = d.parseRawWrite(args)
	}
	if err != nil {
		return parsed{}, &devices.Error{Code: protocol.CodeBadRequest, Message: op + ": " + err.Error(), Err: err}
	}
	return p, nil
}

// strict decodes a JSON object (absent or null: the zero value) into out,
// refusing unknown fields.
func strict(args json.RawMessage, out any) error {
	t := bytes.TrimSpace(args)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%w: args: %s", errValue, strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// parseRead: {"points": [names]}; none named means every point.
func (d *Device) parseRead(args json.RawMessage) ([]Point, error) {
	var a struct {
		Points []string `json:"points"`
	}
	if err := strict(args, &a); err != nil {
		return nil, err
	}
	if len(a.Points) == 0 {
		a.Points = sortedNames(d.spec.Points)
	}
	out := make([]Point, 0, len(a.Points))
	for _, name := range a.Points {
		p, ok := d.spec.points[name]
		if !ok {
			return nil, d.unknownPoint(name)
		}
		out = append(out, p)
	}
	return out, nil
}

func (d *Device) unknownPoint(name string) error {
	return fmt.Errorf("%w: no point %q (points: %s)", errValue, name, strings.Join(sortedNames(d.spec.Points), ", "))
}

// parseWrite: {"point": value, …}, at least one, each writable.
func (d *Device) parseWrite(args json.RawMessage) (*writeSet, error) {
	var a map[string]json.RawMessage
	if err := strict(args, &a); err != nil {
		return nil, err
	}
	if len(a) == 0 {
		return nil, fmt.Errorf("%w: args must name at least one point and its value", errValue)
	}
	w := newWriteSet()
	for _, name := range sortedKeys(a) {
		if err := d.addPoint(w, name, a[name]); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func (d *Device) addPoint(w *writeSet, name string, raw json.RawMessage) error {
	p, ok := d.spec.points[name]
	switch {
	case !ok:
		return d.unknownPoint(name)
	case !p.Writable:
		return fmt.Errorf("%w: point %q is read-only", errValue, name)
	case p.Table == Coils:
		on, err := p.EncodeBit(raw)
		if err != nil {
			return err
		}
		return w.addBit(name, p.Address, on)
	}
	words, err := p.EncodeWords(raw)
	if err != nil {
		return err
	}
	return w.addWords(name, p.Address, words)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// rawArgs are raw_read's and raw_write's args.
type rawArgs struct {
	Table   Table             `json:"table"`
	Address *int              `json:"address"`
	Count   int               `json:"count"`
	Values  []json.RawMessage `json:"values"`
}

// span checks the table and that n items from the address fit in the
// table and in one request of limit items.
func (a rawArgs) span(n, limit int) (uint16, error) {
	switch {
	case !map[Table]bool{Coils: true, DiscreteInputs: true, InputRegisters: true, Holding: true}[a.Table]:
		return 0, fmt.Errorf("%w: table %q is not coil, discrete, input or holding", errValue, a.Table)
	case a.Address == nil || *a.Address < 0 || *a.Address > math.MaxUint16:
		return 0, fmt.Errorf("%w: address is required, 0..65535", errValue)
	case n < 1 || n > limit:
		return 0, fmt.Errorf("%w: %d items; one request takes 1..%d", errValue, n, limit)
	case *a.Address+n > math.MaxUint16+1:
		return 0, fmt.Errorf("%w: %d items from %d run past 65535", errValue, n, *a.Address)
	}
	return uint16(*a.Address), nil
}

func (d *Device) limit(t Table) int {
	if t.bits() {
		return min(d.spec.maxRead*16, MaxReadBits)
	}
	return d.spec.maxRead
}

// parseRawRead: {"table", "address", "count"}.
func (d *Device) parseRawRead(args json.RawMessage) (*readRun, error) {
	var a rawArgs
	if err := strict(args, &a); err != nil {
		return nil, err
	}
	if a.Values != nil {
		return nil, fmt.Errorf("%w: raw_read takes no values", errValue)
	}
	addr, err := a.span(a.Count, d.limit(a.Table))
	if err != nil {
		return nil, err
	}
	return &readRun{table: a.Table, addr: addr, n: a.Count}, nil
}

// parseRawWrite: {"table": holding|coil, "address", "values": [...]}:
// words 0..65535 or booleans, never over the fence registers.
func (d *Device) parseRawWrite(args json.RawMessage) (*writeSet, error) {
	var a rawArgs
	if err := strict(args, &a); err != nil {
		return nil, err
	}
	if a.Table != Holding && a.Table != Coils || a.Count != 0 {
		return nil, fmt.Errorf("%w: raw_write takes table holding or coil, an address and values", errValue)
	}
	limit := d.spec.maxRegs
	if a.Table == Coils {
		limit = min(d.spec.maxRegs*16, MaxWriteCoils)
	}
	addr, err := a.span(len(a.Values), limit)
	if err != nil {
		return nil, err
	}
	if f := d.spec.fence; a.Table == Holding && f != nil && f.overlapsSpan(int(addr), len(a.Values)) {
		return nil, fmt.Errorf("%w: raw_write may not touch fence_registers", errValue)
	}
	return rawWriteSet(a.Table, addr, a.Values)
}

func rawWriteSet(t Table, addr uint16, values []json.RawMessage) (*writeSet, error) {
	w := newWriteSet()
	word := Point{Name: "raw", Type: TypeUint16, Scale: 1}
	for i, raw := range values {
		a := addr + uint16(i)
		var err error
		if t == Coils {
			var on bool
			if on, err = word.EncodeBit(raw); err == nil {
				err = w.addBit("raw", a, on)
			}
		} else {
			var v []uint16
			if v, err = word.EncodeWords(raw); err == nil {
				err = w.addWords("raw", a, v)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("values[%d]: %w", i, err)
		}
	}
	return w, nil
}
