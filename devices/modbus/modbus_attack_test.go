package modbus_test

// Attacks on the Modbus driver: each test states the invariant it checks
// and the scenario that breaks it. They fail on the code they were written
// against; each failure is a finding (see the doc comment of each test).

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/devices/modbus"
	"github.com/fencegate/fencegate/hwtest/simmodbus"
	"github.com/fencegate/fencegate/protocol"
)

// TestAttackCoilNullIsNotObeyed (I6): a coil takes true or false only
// (docs/modbus.md: "Anything else … is refused"). JSON null decodes into
// a Go bool without an error, leaving false, so {"run": null} passes
// CheckArgs and Apply switches the coil OFF — bad input obeyed, and a
// running output stopped by a malformed command. raw_write's values
// [null] do the same.
func TestAttackCoilNullIsNotObeyed(t *testing.T) {
	r := newRig(t, modbus.TCP, simmodbus.Config{}, func(c *modbus.Config) { c.RawOps = true })
	r.mustApply(t, modbus.OpWrite, `{"run":true}`, 1)
	r.mustApply(t, modbus.OpRawWrite, `{"table":"coil","address":7,"values":[true]}`, 1)
	for _, tt := range []struct{ name, op, args string }{
		{"write", modbus.OpWrite, `{"run":null}`},
		{"raw_write", modbus.OpRawWrite, `{"table":"coil","address":7,"values":[null]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := r.dev.CheckArgs(tt.op, json.RawMessage(tt.args)); devices.CodeOf(err) != protocol.CodeBadRequest {
				t.Errorf("CheckArgs(%s) = %v, want bad_request (null is not a boolean)", tt.args, err)
			}
			_, err := r.apply(t, tt.op, tt.args, 1)
			if devices.CodeOf(err) != protocol.CodeBadRequest {
				t.Errorf("Apply(%s) = %v, want bad_request", tt.args, err)
			}
		})
	}
	if !r.plc.Coil(3) || !r.plc.Coil(7) {
		t.Fatalf("coils 3 and 7 are %v and %v after commands with null values: a malformed command switched them off", r.plc.Coil(3), r.plc.Coil(7))
	}
}

// TestAttackHalfStepOf32BitValueIsNotRounded (I6, point encoding): "A
// value is written only if it is exact … never rounded". whole() allows
// a deviation of 1e-9 × |raw|, which for 32-bit raw values above 5e8 is
// more than half a step: 3000000000.5 (not a whole number) is rounded
// to 3000000001 and written; -1500000000.5 on an int32 likewise. The
// command writes a value nobody asked for.
func TestAttackHalfStepOf32BitValueIsNotRounded(t *testing.T) {
	r := newRig(t, modbus.TCP, simmodbus.Config{}, nil)
	for _, args := range []string{`{"u32":3000000000.5}`, `{"i32":-1500000000.5}`, `{"u32":4294967294.6}`} {
		t.Run(args, func(t *testing.T) {
			before := r.plc.Holding(12, 6)
			_, err := r.apply(t, modbus.OpWrite, args, 1)
			if devices.CodeOf(err) != protocol.CodeBadRequest {
				t.Errorf("write %s = %v, want bad_request: the value is not a whole number", args, err)
			}
			if after := r.plc.Holding(12, 6); !equalWords(before, after) {
				t.Errorf("registers 12..17 went from %04x to %04x: a rounded value was written", before, after)
			}
		})
	}
}

// TestAttack32BitPointIsNeverTorn (point encoding): with max_registers 2
// (a device that takes two registers a request), a command writing i16
// (holding 11) and u32 (holding 12..13) is planned as FC 16 at 11..12
// and FC 06 at 13: regRuns splits at the cap without regard to points,
// so the u32's high word goes in one request and its low word in the
// next. If the second request is refused (here: server busy), the
// device is left holding a u32 nobody wrote — 0x0001FFFF = 131071 from
// an old 65535 and a new 65536 — and even without a fault the device
// holds that value between the two requests.
func TestAttack32BitPointIsNeverTorn(t *testing.T) {
	r := newRig(t, modbus.TCP, simmodbus.Config{}, func(c *modbus.Config) { c.MaxRegisters = 2 })
	r.plc.SetHolding(12, 0x0000, 0xFFFF) // u32 = 65535
	r.plc.Inject(simmodbus.Fault{Exception: 6, Only: &simmodbus.Range{Start: 13, Count: 1}})
	_, err := r.apply(t, modbus.OpWrite, `{"i16":7,"u32":65536}`, 1)
	out := r.mustApply(t, modbus.OpRead, `{"points":["u32"]}`, 1)
	if s := string(out); s != `{"u32":65535}` && s != `{"u32":65536}` {
		t.Errorf("after write {i16:7, u32:65536} (%v) the device holds %s: neither the old nor the new value", err, s)
	}
	for _, w := range r.plc.Log() {
		if w.Table == "holding" && (int(w.Addr) == 13 || int(w.Addr)+len(w.Values) == 13) {
			t.Errorf("a request wrote holding %d..%d: it cuts u32 (12..13) in two", w.Addr, int(w.Addr)+len(w.Values)-1)
		}
	}
}

// TestAttackFenceFitsMaxRegisters (CheckArgs vs Apply): with
// max_registers 3 and a PLC fence of 4 registers, every write's first
// request would be an FC 16 of 4 registers, refused by a device honouring
// its cap — after the agent accepted it. Open refuses the config, naming
// the key.
func TestAttackFenceFitsMaxRegisters(t *testing.T) {
	cfg := modbus.Config{Transport: modbus.TCP, TCP: modbus.TCPConfig{Address: "127.0.0.1:1"}, Points: testPoints(),
		MaxRegisters: 3, Fence: &modbus.FenceConfig{Address: ip(1000)}}
	d, err := modbus.Open("plc", cfg, nil)
	if err == nil {
		d.Close()
		t.Fatal("a fence block wider than max_registers was accepted")
	}
	if !strings.Contains(err.Error(), "max_registers") {
		t.Fatalf("Open: %v, want an error naming max_registers", err)
	}
}

// TestAttackSeqLayoutOlderEpochPasses (I2's second fence): once the PLC
// holds a lease of a new epoch (2, 5), a lease of the old epoch with a
// higher seq (1, 7) — older by the token order — must not pass the PLC.
// The attack found that layout seq lets it through (it compares seq
// alone: documented in docs/modbus.md as the layout's limit); layout
// epoch_seq refuses it, which this test keeps.
func TestAttackSeqLayoutOlderEpochPasses(t *testing.T) {
	for _, mode := range []string{"exception", "status"} {
		t.Run(mode, func(t *testing.T) {
			r, _ := fenceRig(t, modbus.TCP, modbus.LayoutEpochSeq, mode == "status")
			if _, err := r.applyTok(t, modbus.OpWrite, `{"u16":1}`, token(2, 5)); err != nil {
				t.Fatalf("the newest lease (2, 5): %v", err)
			}
			_, err := r.applyTok(t, modbus.OpWrite, `{"u16":2}`, token(1, 7))
			if devices.CodeOf(err) != devices.CodeStaleToken {
				t.Errorf("a lease of the old epoch (1, 7) after (2, 5): %v, want stale_token", err)
			}
			if v := r.plc.Holding(10, 1)[0]; v != 1 {
				t.Errorf("u16 = %d: the older lease's value reached the PLC past its fence", v)
			}
		})
	}
}

// TestAttackGatewayNoResponseIsInDoubt (I4): Modbus TCP gateways to RTU
// slaves answer exception 11 ("gateway target device failed to respond")
// when the slave's response did not come — the request was forwarded
// and may have been applied. Exception 5 ("acknowledge") means the
// device accepted the request and is still carrying it out. The driver
// maps every exception to device_error, which promises the command did
// not take effect (devices.Driver); a supervisor then believes a write
// that reached the device failed. Such a write must be in_doubt.
func TestAttackGatewayNoResponseIsInDoubt(t *testing.T) {
	for _, tt := range []struct {
		name string
		code byte
	}{
		{"gateway target failed to respond", 11},
		{"acknowledge", 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gw := newFakeGateway(t, tt.code)
			d, err := modbus.Open("gw", modbus.Config{Transport: modbus.TCP, RequestTimeout: time.Second,
				TCP:    modbus.TCPConfig{Address: gw.addr(), ReconnectMin: 10 * time.Millisecond, ReconnectMax: 100 * time.Millisecond},
				Points: modbus.Points{"setpoint": pc("holding", 100, "", true)}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = d.Apply(ctx, devices.Command{ID: "c", Op: modbus.OpWrite, Args: json.RawMessage(`{"setpoint":42}`), Token: token(1, 1)})
			if gw.forwarded() == 0 {
				t.Fatalf("the gateway got no write (%v)", err)
			}
			if devices.CodeOf(err) != devices.CodeInDoubt {
				t.Fatalf("a write the gateway forwarded, answered exception %d: %v (code %s), want in_doubt", tt.code, err, devices.CodeOf(err))
			}
		})
	}
}

func equalWords(a, b []uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// fakeGateway is a Modbus TCP gateway whose RTU slave never answers in
// time: it forwards every write (counted) and answers it with an
// exception.
type fakeGateway struct {
	l    net.Listener
	code byte
	wg   sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
	fwd   int
}

func newFakeGateway(t *testing.T, code byte) *fakeGateway {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &fakeGateway{l: l, code: code}
	g.wg.Add(1)
	go g.accept()
	t.Cleanup(g.close)
	return g
}

func (g *fakeGateway) addr() string { return g.l.Addr().String() }

func (g *fakeGateway) forwarded() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fwd
}

func (g *fakeGateway) accept() {
	defer g.wg.Done()
	for {
		c, err := g.l.Accept()
		if err != nil {
			return
		}
		g.mu.Lock()
		g.conns = append(g.conns, c)
		g.mu.Unlock()
		g.wg.Add(1)
		go g.serve(c)
	}
}

// serve answers every MBAP request with the exception; a write request
// counts as forwarded to the slave.
func (g *fakeGateway) serve(c net.Conn) {
	defer g.wg.Done()
	for {
		var h [7]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return
		}
		body := make([]byte, int(binary.BigEndian.Uint16(h[4:]))-1)
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		fn := body[0]
		if fn == modbus.FuncWriteRegister || fn == modbus.FuncWriteRegisters || fn == modbus.FuncWriteCoil || fn == modbus.FuncWriteCoils {
			g.mu.Lock()
			g.fwd++
			g.mu.Unlock()
		}
		res := append(binary.BigEndian.AppendUint16(nil, binary.BigEndian.Uint16(h[:])), 0, 0, 0, 3, h[6], fn|0x80, g.code)
		if _, err := c.Write(res); err != nil {
			return
		}
	}
}

func (g *fakeGateway) close() {
	g.l.Close()
	g.mu.Lock()
	for _, c := range g.conns {
		c.Close()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// TestAttackTCPEndpointNotExclusive (I7 for Modbus TCP): an RTU port is
// held exclusively, so two device entries cannot drive one bus; two
// entries naming the same TCP address and unit both open, each with its
// own worker and, if their domains differ, its own fence — a holder of
// either domain writes the same PLC, so neither domain's fence keeps the
// other's stale holders out. The second open should be refused as a
// held serial port is.
func TestAttackTCPEndpointNotExclusive(t *testing.T) {
	r := newRig(t, modbus.TCP, simmodbus.Config{}, nil)
	second, err := modbus.Open("same-plc-other-domain", r.cfg, nil)
	if err == nil {
		second.Close()
		t.Fatalf("a second device for %s unit 1 opened: two device entries (two fencing domains) drive one PLC", r.cfg.TCP.Address)
	}
}
