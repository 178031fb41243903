package modbus_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/devices/modbus"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/hwtest/simmodbus"
	"github.com/fencegate/fencegate/transport/serial"
)

// rig is a driver talking to a simulated PLC over a real pseudo-terminal
// (RTU) or a real loopback TCP connection.
type rig struct {
	plc  *simmodbus.PLC
	dev  *modbus.Device
	link string               // rtu: the symlink the driver opened
	rtu  *simmodbus.RTUServer // rtu only
	tcp  *simmodbus.TCPServer // tcp only
	cfg  modbus.Config
}

func ip(v int) *int         { return &v }
func fp(v float64) *float64 { return &v }
func pc(table string, addr int, typ string, writable bool) modbus.PointConfig {
	return modbus.PointConfig{Table: table, Address: ip(addr), Type: typ, Writable: writable}
}

// testPoints has a point of every type and word order.
func testPoints() modbus.Points {
	lo := func(p modbus.PointConfig) modbus.PointConfig { p.WordOrder = modbus.LowFirst; return p }
	speed := pc("holding", 30, "", true)
	speed.Scale = fp(0.1)
	temp := pc("input", 5, "int16", false)
	temp.Scale, temp.Offset = fp(0.5), -40
	return modbus.Points{
		"u16": pc("holding", 10, "uint16", true), "i16": pc("holding", 11, "int16", true),
		"u32": pc("holding", 12, "uint32", true), "u32lo": lo(pc("holding", 14, "uint32", true)),
		"i32": pc("holding", 16, "int32", true), "i32lo": lo(pc("holding", 18, "int32", true)),
		"f32": pc("holding", 20, "float32", true), "f32lo": lo(pc("holding", 22, "float32", true)),
		"speed": speed, "temp": temp, "run": pc("coil", 3, "", true), "dir": pc("coil", 4, "", true),
		"fault": pc("discrete", 4, "", false), "limit": pc("holding", 40, "", false),
		"locked": pc("holding", 150, "", true), "beyond": pc("holding", 9999, "uint32", false),
	}
}

// newRig starts a PLC (plcCfg) and a driver for it over transport; edit
// adjusts the driver's config.
func newRig(t *testing.T, transport string, plcCfg simmodbus.Config, edit func(*modbus.Config)) *rig {
	t.Helper()
	plcCfg.Protected = append(plcCfg.Protected, simmodbus.Range{Start: 150, Count: 1})
	p, err := simmodbus.NewPLC(plcCfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{plc: p, cfg: modbus.Config{Transport: transport, RequestTimeout: 300 * time.Millisecond, Points: testPoints()}}
	t.Cleanup(p.Close) // last: after the servers and the driver
	r.serve(t, transport)
	if edit != nil {
		edit(&r.cfg)
	}
	r.dev, err = modbus.Open("plc", r.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.dev.Close() })
	return r
}

func (r *rig) serve(t *testing.T, transport string) {
	t.Helper()
	if transport == modbus.TCP {
		s, err := simmodbus.ServeTCP(r.plc, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r.tcp = s
		t.Cleanup(func() { r.tcp.Close() })
		r.cfg.TCP = modbus.TCPConfig{Address: s.Addr(), ReconnectMin: 10 * time.Millisecond, ReconnectMax: 100 * time.Millisecond}
		return
	}
	r.link = filepath.Join(t.TempDir(), "plc")
	s, err := simmodbus.ServeRTU(r.plc, r.link)
	if err != nil {
		t.Skipf("pseudo-terminals unavailable: %v", err)
	}
	r.rtu = s
	t.Cleanup(func() { s.Close() })
	r.cfg.Port = serial.Config{Path: r.link, Baud: 115200, ReadTimeout: 20 * time.Millisecond,
		ReopenMin: 10 * time.Millisecond, ReopenMax: 100 * time.Millisecond}
}

// token is a verified token of domain plant at (epoch, seq), as the
// agent hands it to a driver.
func token(epoch, seq uint64) fence.Token {
	return fence.Token{Domain: "plant", Epoch: epoch, Seq: seq, Holder: "sup"}
}

// apply runs one command at (1, seq) with a deadline of 5 s.
func (r *rig) apply(t *testing.T, op, args string, seq uint64) (json.RawMessage, error) {
	t.Helper()
	return r.applyTok(t, op, args, token(1, seq))
}

func (r *rig) applyTok(t *testing.T, op, args string, tok fence.Token) (json.RawMessage, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := devices.Command{ID: "c", Op: op, Token: tok}
	if args != "" {
		c.Args = json.RawMessage(args)
	}
	return r.dev.Apply(ctx, c)
}

// mustApply fails t unless the command succeeds.
func (r *rig) mustApply(t *testing.T, op, args string, seq uint64) json.RawMessage {
	t.Helper()
	out, err := r.apply(t, op, args, seq)
	if err != nil {
		t.Fatalf("%s %s: %v", op, args, err)
	}
	return out
}

// expectCode fails t unless err has code.
func expectCode(t *testing.T, err error, code devices.Code) {
	t.Helper()
	if devices.CodeOf(err) != code || err == nil {
		t.Fatalf("err = %v (code %s), want %s", err, devices.CodeOf(err), code)
	}
}

// both runs f for each transport.
func both(t *testing.T, f func(t *testing.T, transport string)) {
	for _, tr := range []string{modbus.RTU, modbus.TCP} {
		t.Run(tr, func(t *testing.T) { f(t, tr) })
	}
}
