package simmodbus

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	mb "github.com/simonvetter/modbus"

	"github.com/fencegate/fencegate/internal/atomicfile"
)

// Config describes the simulated PLC. Zero values mean defaults.
type Config struct {
	// Unit is the RTU address the PLC answers (requests to other units
	// are ignored, as on a shared bus). Default 1. Over TCP every unit id
	// is answered.
	Unit byte
	// Size is how many addresses each table has (0..Size-1); others are
	// answered "illegal data address". Default 10000.
	Size int
	// Protected holding registers are refused on write with "illegal
	// data address", as a VFD refuses its read-only parameters.
	Protected []Range
	// Fence is the PLC-side fence; nil for none.
	Fence *Fence
	// StateFile keeps the fence's highest position across restarts (the
	// PLC's RETAIN memory); empty: kept in memory only.
	StateFile string
}

// Range is Count consecutive addresses from Start.
type Range struct{ Start, Count int }

func (r Range) overlaps(addr, n int) bool { return addr < r.Start+r.Count && addr+n > r.Start }

// Fence is the reference PLC fence (docs/modbus.md): Words holding
// registers from Address hold a token position, compared word by word,
// unsigned, first register first.
type Fence struct {
	Address uint16
	// Words is 4 (layout seq) or 8 (layout epoch_seq). Default 4.
	Words int
	// Status: the PLC program judges the fence each scan, as the reference
	// structured-text routine does, and writes its verdict into the
	// register after the block (1 accepted, 2 stale; the driver writes 0
	// with the fence). Otherwise the PLC's Modbus server refuses a write
	// carrying a stale fence with exception Exception, applying none of it.
	Status bool
	// Scan is the program's cycle time in status mode. Default 5ms.
	Scan time.Duration
	// Exception refuses a stale fence in exception mode. Default 3
	// (illegal data value).
	Exception byte
}

// Write is one applied write, as the log records it.
type Write struct {
	Table  string   `json:"table"` // "holding" or "coil"
	Addr   uint16   `json:"addr"`
	Values []uint16 `json:"values"` // coils as 0 and 1
}

// Stats counts what the PLC did.
type Stats struct {
	Requests    int      `json:"requests"`     // requests taken off the line
	Writes      int      `json:"writes"`       // write requests applied
	Stale       int      `json:"stale"`        // fences refused
	Exceptions  int      `json:"exceptions"`   // requests answered with an exception
	Unanswered  int      `json:"unanswered"`   // requests left without a response (faults)
	FenceWords  []uint16 `json:"fence_words"`  // the highest fence accepted
	FenceStatus uint16   `json:"fence_status"` // the status register (status mode)
}

// PLC is a simulated Modbus device: the four tables, the reference fence
// and fault injection. It serves any number of transports (ServeTCP,
// ServeRTU); its methods are safe for concurrent use.
type PLC struct {
	cfg Config
	// hold is closed by Close: handlers holding a response back return.
	hold     chan struct{}
	stopScan chan struct{}
	scanDone chan struct{}

	mu       sync.Mutex // guards the fields below
	coils    []bool
	discrete []bool
	holding  []uint16
	input    []uint16
	highest  []uint16
	faults   []Fault
	latency  time.Duration
	log      []Write
	stats    Stats
	closed   bool
}

// NewPLC returns a PLC with all tables zero (the fence block and highest
// from StateFile). In status mode it starts the scan goroutine, which
// Close stops.
func NewPLC(cfg Config) (*PLC, error) {
	cfg = cfg.withDefaults()
	p := &PLC{cfg: cfg, hold: make(chan struct{}), coils: make([]bool, cfg.Size), discrete: make([]bool, cfg.Size),
		holding: make([]uint16, cfg.Size), input: make([]uint16, cfg.Size)}
	if f := cfg.Fence; f != nil {
		if int(f.Address)+f.Words+1 > cfg.Size {
			return nil, fmt.Errorf("simmodbus: fence registers %d..%d outside the table of %d", f.Address, int(f.Address)+f.Words, cfg.Size)
		}
		if err := p.loadFence(); err != nil {
			return nil, err
		}
	}
	if f := cfg.Fence; f != nil && f.Status {
		p.stopScan, p.scanDone = make(chan struct{}), make(chan struct{})
		go p.scanLoop()
	}
	return p, nil
}

func (c Config) withDefaults() Config {
	if c.Unit == 0 {
		c.Unit = 1
	}
	if c.Size == 0 {
		c.Size = 10000
	}
	if f := c.Fence; f != nil {
		g := *f
		if g.Words == 0 {
			g.Words = 4
		}
		if g.Scan == 0 {
			g.Scan = 5 * time.Millisecond
		}
		if g.Exception == 0 {
			g.Exception = 3
		}
		c.Fence = &g
	}
	return c
}

// Close stops the scan and releases handlers holding a response back.
// Safe to call more than once.
func (p *PLC) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	close(p.hold)
	if p.stopScan != nil {
		close(p.stopScan)
		<-p.scanDone
	}
}

// stateFile is the fence's RETAIN memory on disk.
type stateFile struct {
	Words []uint16 `json:"words"`
}

// loadFence reads the highest position and puts it in the fence block
// (status mode: with the status at 1, nothing pending).
func (p *PLC) loadFence() error {
	f := p.cfg.Fence
	p.highest = make([]uint16, f.Words)
	if p.cfg.StateFile != "" {
		b, err := os.ReadFile(p.cfg.StateFile)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return fmt.Errorf("simmodbus: %w", err)
		default:
			var s stateFile
			if err := json.Unmarshal(b, &s); err != nil {
				return fmt.Errorf("simmodbus: state file %s: %w", p.cfg.StateFile, err)
			}
			if len(s.Words) != f.Words {
				return fmt.Errorf("simmodbus: state file %s holds %d fence words, want %d", p.cfg.StateFile, len(s.Words), f.Words)
			}
			copy(p.highest, s.Words)
		}
	}
	copy(p.holding[f.Address:], p.highest)
	if f.Status {
		p.holding[int(f.Address)+f.Words] = 1
	}
	return nil
}

// raise records a new highest position (the mutex is held); the state
// file is replaced atomically before the write it guards is applied.
func (p *PLC) raise(w []uint16) error {
	p.highest = append(p.highest[:0], w...)
	if p.cfg.StateFile == "" {
		return nil
	}
	b, _ := json.Marshal(stateFile{Words: p.highest})
	return atomicfile.WriteFile(p.cfg.StateFile, b, 0o600, true)
}

// compareWords orders two fence blocks word by word, unsigned.
func compareWords(a, b []uint16) int {
	for i := range a {
		switch {
		case a[i] < b[i]:
			return -1
		case a[i] > b[i]:
			return 1
		}
	}
	return 0
}

// scanLoop is the PLC program's cycle in status mode.
func (p *PLC) scanLoop() {
	defer close(p.scanDone)
	t := time.NewTicker(p.cfg.Fence.Scan)
	defer t.Stop()
	for {
		select {
		case <-p.stopScan:
			return
		case <-t.C:
			p.scan()
		}
	}
}

// scan is the reference routine: a pending fence at or above the highest
// is taken (status 1); one below it is refused (status 2) and the block
// shows the highest again.
func (p *PLC) scan() {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.cfg.Fence
	block, status := p.holding[f.Address:int(f.Address)+f.Words], int(f.Address)+f.Words
	if p.holding[status] != 0 {
		return
	}
	if compareWords(block, p.highest) >= 0 && p.raise(block) == nil {
		p.holding[status] = 1
		return
	}
	p.stats.Stale++
	copy(block, p.highest)
	p.holding[status] = 2
}

// Fault is what happens to one request. At most one field is set.
type Fault struct {
	// Exception answers the request with this exception code; nothing is
	// applied.
	Exception byte
	// Drop applies the request and sends no response.
	Drop bool
	// Lose applies nothing and sends no response (the request was lost).
	Lose bool
	// Late applies the request and sends the response this much later.
	Late time.Duration
	// Garble (RTU) sends the response with a wrong CRC; it is applied.
	Garble bool
	// Noise (RTU) sends junk bytes, then the response.
	Noise bool
	// Only, if set, keeps the fault for the next request whose addresses
	// overlap it (a write of values, not the fence or status reads before
	// it); requests in between take the faults queued after it.
	Only *Range
}

// Inject queues f for the next request that has none (FIFO).
func (p *PLC) Inject(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, f)
}

// SetLatency delays every response by d (0: none).
func (p *PLC) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// take returns the fault for the request just received, for n
// addresses from addr, and the latency.
func (p *PLC) take(addr, n int) (Fault, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Requests++
	var f Fault
	for i, g := range p.faults {
		if g.Only == nil || g.Only.overlaps(addr, n) {
			f = g
			p.faults = append(p.faults[:i:i], p.faults[i+1:]...)
			break
		}
	}
	if f.Drop || f.Lose {
		p.stats.Unanswered++
	}
	return f, p.latency
}

// holdBack waits until Close (a response that never comes) or d.
func (p *PLC) holdBack(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.hold:
	case <-t.C:
	}
}

// Stats returns the counters and the fence.
func (p *PLC) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	if f := p.cfg.Fence; f != nil {
		s.FenceWords = append([]uint16(nil), p.highest...)
		if f.Status {
			s.FenceStatus = p.holding[int(f.Address)+f.Words]
		}
	}
	return s
}

// Log returns the writes applied so far, in order.
func (p *PLC) Log() []Write {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Write(nil), p.log...)
}

// Holding returns n holding registers from addr.
func (p *PLC) Holding(addr, n int) []uint16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]uint16(nil), p.holding[addr:addr+n]...)
}

// Coil returns one coil.
func (p *PLC) Coil(addr int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.coils[addr]
}

// SetInput sets input registers from addr (what the process measures).
func (p *PLC) SetInput(addr int, v ...uint16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	copy(p.input[addr:], v)
}

// SetDiscrete sets discrete inputs from addr.
func (p *PLC) SetDiscrete(addr int, v ...bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	copy(p.discrete[addr:], v)
}

// SetHolding sets holding registers from addr, as the PLC program would
// (no fence check, not logged).
func (p *PLC) SetHolding(addr int, v ...uint16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	copy(p.holding[addr:], v)
}

// errAddress is "illegal data address".
var errAddress = mb.ErrIllegalDataAddress
