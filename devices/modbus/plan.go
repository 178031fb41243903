package modbus

import (
	"fmt"
	"sort"
)

// writeSet is what one write command writes: holding registers and coils
// by address, each with the point that owns it (for overlap errors).
type writeSet struct {
	regs    map[uint16]uint16
	tails   map[uint16]bool // registers that continue a point begun at the one before: no request may start there
	coils   map[uint16]bool
	owner   map[Table]map[uint16]string
	nvalues int
}

func newWriteSet() *writeSet {
	return &writeSet{regs: map[uint16]uint16{}, tails: map[uint16]bool{}, coils: map[uint16]bool{},
		owner: map[Table]map[uint16]string{Holding: {}, Coils: {}}}
}

// claim records that name writes addr of table; two points of one
// command may not write the same register or coil.
func (w *writeSet) claim(t Table, addr uint16, name string) error {
	if other, ok := w.owner[t][addr]; ok {
		return fmt.Errorf("%w: points %q and %q both write %s %d", errValue, other, name, t, addr)
	}
	w.owner[t][addr] = name
	w.nvalues++
	return nil
}

func (w *writeSet) addWords(name string, addr uint16, words []uint16) error {
	for i, v := range words {
		a := addr + uint16(i)
		if err := w.claim(Holding, a, name); err != nil {
			return err
		}
		w.regs[a] = v
		if i > 0 {
			w.tails[a] = true
		}
	}
	return nil
}

func (w *writeSet) addBit(name string, addr uint16, on bool) error {
	if err := w.claim(Coils, addr, name); err != nil {
		return err
	}
	w.coils[addr] = on
	return nil
}

// request is one Modbus request of a write command.
type request struct {
	pdu    PDU
	fence  bool // it carries the fence block
	values bool // it carries values of the command
}

// regRun is consecutive holding registers from addr.
type regRun struct {
	addr  uint16
	words []uint16
}

func (r regRun) end() int { return int(r.addr) + len(r.words) }

// planWrite turns a write set into requests, in the documented order
// (docs/modbus.md): the fence block first, in one FC 16 with the value
// registers adjacent to it when the PLC refuses by exception; then the
// holding registers in ascending runs of consecutive addresses (FC 06 for
// a run of one, FC 16 otherwise, at most maxRegs a request); then the
// coils likewise (FC 05, FC 15). fence is nil without a PLC fence.
func planWrite(w *writeSet, f *fenceSpec, fence []uint16, maxRegs int) []request {
	runs := regRuns(w.regs, w.tails, maxRegs)
	var reqs []request
	if fence != nil {
		fr := regRun{addr: f.addr, words: fence}
		if f.status == nil {
			fr, runs = absorb(fr, runs, maxRegs)
		}
		reqs = append(reqs, request{pdu: writeRegistersRequest(fr.addr, fr.words), fence: true, values: len(fr.words) > len(fence)})
	}
	for _, r := range runs {
		reqs = append(reqs, request{pdu: registersPDU(r), values: true})
	}
	for _, r := range bitRuns(w.coils, min(maxRegs*16, MaxWriteCoils)) {
		reqs = append(reqs, request{pdu: coilsPDU(r), values: true})
	}
	return reqs
}

func registersPDU(r regRun) PDU {
	if len(r.words) == 1 {
		return writeRegisterRequest(r.addr, r.words[0])
	}
	return writeRegistersRequest(r.addr, r.words)
}

// absorb merges into the fence run the value runs that end right before it
// or start right after it, while the request stays within maxRegs.
func absorb(fr regRun, runs []regRun, maxRegs int) (regRun, []regRun) {
	var rest []regRun
	for _, r := range runs {
		switch {
		case r.end() == int(fr.addr) && len(r.words)+len(fr.words) <= maxRegs:
			fr = regRun{addr: r.addr, words: append(append([]uint16(nil), r.words...), fr.words...)}
		case int(r.addr) == fr.end() && len(r.words)+len(fr.words) <= maxRegs:
			fr.words = append(append([]uint16(nil), fr.words...), r.words...)
		default:
			rest = append(rest, r)
		}
	}
	return fr, rest
}

// regRuns groups registers into runs of consecutive addresses, ascending,
// each of at most max registers (max ≥ 2), never splitting a point: a run
// that is full just before a tail (the second word of a 32-bit point) hands
// that point's first word to the next run, so no device ever holds half of
// a new value and half of the old one.
func regRuns(regs map[uint16]uint16, tails map[uint16]bool, max int) []regRun {
	var runs []regRun
	for _, a := range sortedAddrs(regs) {
		n := len(runs)
		switch {
		case n > 0 && runs[n-1].end() == int(a) && len(runs[n-1].words) < max:
			runs[n-1].words = append(runs[n-1].words, regs[a])
		case n > 0 && runs[n-1].end() == int(a) && tails[a] && len(runs[n-1].words) > 1:
			last := &runs[n-1]
			head := last.words[len(last.words)-1]
			last.words = last.words[:len(last.words)-1]
			runs = append(runs, regRun{addr: a - 1, words: []uint16{head, regs[a]}})
		default:
			runs = append(runs, regRun{addr: a, words: []uint16{regs[a]}})
		}
	}
	return runs
}

// bitRun is consecutive coils from addr.
type bitRun struct {
	addr uint16
	bits []bool
}

func bitRuns(coils map[uint16]bool, max int) []bitRun {
	var runs []bitRun
	for _, a := range sortedAddrs(coils) {
		n := len(runs)
		if n > 0 && int(runs[n-1].addr)+len(runs[n-1].bits) == int(a) && len(runs[n-1].bits) < max {
			runs[n-1].bits = append(runs[n-1].bits, coils[a])
			continue
		}
		runs = append(runs, bitRun{addr: a, bits: []bool{coils[a]}})
	}
	return runs
}

func coilsPDU(r bitRun) PDU {
	if len(r.bits) == 1 {
		return writeCoilRequest(r.addr, r.bits[0])
	}
	return writeCoilsRequest(r.addr, r.bits)
}

func sortedAddrs[V any](m map[uint16]V) []uint16 {
	out := make([]uint16, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// readRun is one read request: n registers or bits of table from addr.
type readRun struct {
	table Table
	addr  uint16
	n     int
}

func (r readRun) end() int { return int(r.addr) + r.n }

func (r readRun) pdu() PDU { return readRequest(r.table.readFunction(), r.addr, uint16(r.n)) }

// tableOrder is the order reads go out in.
var tableOrder = []Table{Coils, DiscreteInputs, InputRegisters, Holding}

// planRead covers points with the fewest reads: per table, in this order
// — coils, discrete inputs, input registers, holding registers — ascending
// runs that merge points which overlap or touch, each of at most maxRegs
// registers (maxRegs×16 bits, at most 2000). Registers between two points
// are never read: a device may refuse an address no point names.
func planRead(points []Point, maxRegs int) []readRun {
	var runs []readRun
	for _, t := range tableOrder {
		limit := maxRegs
		if t.bits() {
			limit = min(maxRegs*16, MaxReadBits)
		}
		runs = append(runs, mergeReads(t, pointsOf(points, t), limit)...)
	}
	return runs
}

func pointsOf(points []Point, t Table) []Point {
	var out []Point
	for _, p := range points {
		if p.Table == t {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out
}

func mergeReads(t Table, sorted []Point, limit int) []readRun {
	var runs []readRun
	for _, p := range sorted {
		n := len(runs)
		if n > 0 && int(p.Address) <= runs[n-1].end() && max(runs[n-1].end(), p.end())-int(runs[n-1].addr) <= limit {
			runs[n-1].n = max(runs[n-1].end(), p.end()) - int(runs[n-1].addr)
			continue
		}
		runs = append(runs, readRun{table: t, addr: p.Address, n: p.Words()})
	}
	return runs
}

// covering returns the run of runs that holds all of p.
func covering(runs []readRun, p Point) (readRun, bool) {
	for _, r := range runs {
		if r.table == p.Table && int(p.Address) >= int(r.addr) && p.end() <= r.end() {
			return r, true
		}
	}
	return readRun{}, false
}
