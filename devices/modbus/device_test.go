package modbus_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/devices/modbus"
	"github.com/fencegate/fencegate/hwtest/simmodbus"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/serial"
)

// allValues writes every writable point of testPoints but "locked".
const allValues = `{"u16":65535,"i16":-2,"u32":305419896,"u32lo":305419896,"i32":-100000,"i32lo":-100000,
	"f32":1.5,"f32lo":-0.1,"speed":12.3,"run":true,"dir":false}`

// TestWriteReadEveryType: one write command puts every type and word
// order into the registers a device expects, with the fewest requests;
// a read gives the values back, scaled.
func TestWriteReadEveryType(t *testing.T) {
	both(t, func(t *testing.T, tr string) {
		r := newRig(t, tr, simmodbus.Config{}, nil)
		r.plc.SetInput(5, 0xFFFF) // -1 × 0.5 − 40
		r.plc.SetDiscrete(4, true)
		r.plc.SetHolding(40, 7)
		r.mustApply(t, modbus.OpWrite, allValues, 1)
		want := "[ffff fffe 1234 5678 5678 1234 fffe 7960 7960 fffe 3fc0 0000 cccd bdcc]"
		if got := fmt.Sprintf("%04x", r.plc.Holding(10, 14)); got != want {
			t.Fatalf("holding 10..23 = %s, want %s", got, want)
		}
		if v := r.plc.Holding(30, 1)[0]; v != 123 {
			t.Fatalf("speed register %d, want 123", v)
		}
		if !r.plc.Coil(3) || r.plc.Coil(4) {
			t.Fatal("coils run/dir not written")
		}
		// holding 10..23 (FC 16), holding 30 (FC 06), coils 3..4 (FC 15)
		if n := len(r.plc.Log()); n != 3 {
			t.Fatalf("%d write requests, want 3: %+v", n, r.plc.Log())
		}
		out := r.mustApply(t, modbus.OpRead, `{"points":["u16","i16","u32","u32lo","i32","i32lo","f32","f32lo","speed","temp","run","dir","fault","limit"]}`, 1)
		wantOut := `{"dir":false,"f32":1.5,"f32lo":-0.1,"fault":true,"i16":-2,"i32":-100000,"i32lo":-100000,"limit":7,"run":true,"speed":12.3,"temp":-40.5,"u16":65535,"u32":305419896,"u32lo":305419896}`
		if string(out) != wantOut {
			t.Fatalf("read %s\nwant %s", out, wantOut)
		}
	})
}

// TestBadArgsSendNothing: args naming unknown or read-only points, or
// values their points cannot hold, are bad_request and nothing goes to
// the device; CheckArgs says the same without a device.
func TestBadArgsSendNothing(t *testing.T) {
	r := newRig(t, modbus.TCP, simmodbus.Config{}, nil)
	bad := []struct{ name, op, args string }{
		{"unknown point", modbus.OpWrite, `{"nope":1}`},
		{"read-only point", modbus.OpWrite, `{"limit":1}`},
		{"input point", modbus.OpWrite, `{"temp":1}`},
		{"out of range", modbus.OpWrite, `{"u16":65536}`},
		{"negative unsigned", modbus.OpWrite, `{"u32":-1}`},
		{"not a step", modbus.OpWrite, `{"speed":1.25}`},
		{"string value", modbus.OpWrite, `{"u16":"1"}`},
		{"number for a coil", modbus.OpWrite, `{"run":1}`},
		{"one bad among good", modbus.OpWrite, `{"u16":1,"i16":40000}`},
		{"empty write", modbus.OpWrite, `{}`},
		{"not an object", modbus.OpWrite, `[1]`},
		{"read of unknown point", modbus.OpRead, `{"points":["u16","nope"]}`},
		{"read with unknown arg", modbus.OpRead, `{"point":["u16"]}`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			before := r.plc.Stats().Requests
			_, err := r.apply(t, tt.op, tt.args, 1)
			expectCode(t, err, protocol.CodeBadRequest)
			expectCode(t, r.dev.CheckArgs(tt.op, json.RawMessage(tt.args)), protocol.CodeBadRequest)
			if after := r.plc.Stats().Requests; after != before {
				t.Fatalf("the device got %d requests", after-before)
			}
		})
	}
	if _, err := r.apply(t, modbus.OpRawRead, `{"table":"holding","address":1,"count":1}`, 1); devices.CodeOf(err) != devices.CodeUnknownOp {
		t.Fatalf("raw_read without raw_ops: %v, want unknown_op", err)
	}
}

// TestExceptionsAreDeviceErrors: an exception response is device_error
// with the exception's name; nothing was written.
func TestExceptionsAreDeviceErrors(t *testing.T) {
	both(t, func(t *testing.T, tr string) {
		r := newRig(t, tr, simmodbus.Config{}, nil)
		_, err := r.apply(t, modbus.OpWrite, `{"locked":1}`, 1)
		expectCode(t, err, devices.CodeDeviceError)
		if !strings.Contains(err.Error(), "illegal data address") {
			t.Fatalf("message %q lacks the exception name", err)
		}
		_, err = r.apply(t, modbus.OpRead, `{"points":["beyond"]}`, 1)
		expectCode(t, err, devices.CodeDeviceError)
		r.plc.Inject(simmodbus.Fault{Exception: 6})
		_, err = r.apply(t, modbus.OpWrite, `{"u16":5}`, 1)
		expectCode(t, err, devices.CodeDeviceError)
		if !strings.Contains(err.Error(), "server device busy") || r.plc.Holding(10, 1)[0] != 0 {
			t.Fatalf("busy: %v, register %d", err, r.plc.Holding(10, 1)[0])
		}
	})
}

// TestTimeouts: a write without a response is in_doubt (applied or not:
// the driver cannot know), a read without one is device_timeout; the next
// command gets its own answer.
func TestTimeouts(t *testing.T) {
	both(t, func(t *testing.T, tr string) {
		r := newRig(t, tr, simmodbus.Config{}, nil)
		r.plc.Inject(simmodbus.Fault{Drop: true})
		_, err := r.apply(t, modbus.OpWrite, `{"u16":1}`, 1)
		expectCode(t, err, devices.CodeInDoubt)
		r.plc.Inject(simmodbus.Fault{Lose: true})
		_, err = r.apply(t, modbus.OpWrite, `{"u16":2}`, 1)
		expectCode(t, err, devices.CodeInDoubt)
		if v := r.plc.Holding(10, 1)[0]; v != 1 {
			t.Fatalf("register %d, want 1 (the dropped response's write applied, the lost one not)", v)
		}
		r.plc.Inject(simmodbus.Fault{Drop: true})
		_, err = r.apply(t, modbus.OpRead, `{"points":["u16"]}`, 1)
		expectCode(t, err, devices.CodeDeviceTimeout)
		r.mustApply(t, modbus.OpWrite, `{"u16":3}`, 1)
		if out := r.mustApply(t, modbus.OpRead, `{"points":["u16"]}`, 1); string(out) != `{"u16":3}` {
			t.Fatalf("read after timeouts %s", out)
		}
	})
}

// TestLateResponseNotTakenForNext: RTU has no transaction ids. A read's
// response comes after request_timeout; the next read (same function,
// same length) must get its own response, not the late one: the driver
// waits for the line to be quiet and flushes it before the next request.
func TestLateResponseNotTakenForNext(t *testing.T) {
	r := newRig(t, modbus.RTU, simmodbus.Config{}, func(c *modbus.Config) {
		c.RequestTimeout, c.Quiet = 200*time.Millisecond, 300*time.Millisecond
	})
	r.plc.SetHolding(10, 111)
	r.plc.SetHolding(11, 222)
	r.plc.Inject(simmodbus.Fault{Late: 350 * time.Millisecond})
	_, err := r.apply(t, modbus.OpRead, `{"points":["u16"]}`, 1)
	expectCode(t, err, devices.CodeDeviceTimeout)
	out := r.mustApply(t, modbus.OpRead, `{"points":["i16"]}`, 1)
	if string(out) != `{"i16":222}` {
		t.Fatalf("second read %s, want its own value 222 (111 is the late response to the first)", out)
	}
}

// TestLateWriteEchoNotTakenForNext: a write's late echo (another address)
// arriving while the next write waits is skipped, not taken for its
// answer; with the quiet period it is drained before.
func TestLateWriteEchoNotTakenForNext(t *testing.T) {
	r := newRig(t, modbus.RTU, simmodbus.Config{}, func(c *modbus.Config) { c.Quiet = time.Millisecond })
	r.plc.Inject(simmodbus.Fault{Late: 400 * time.Millisecond})
	_, err := r.apply(t, modbus.OpWrite, `{"u16":1}`, 1)
	expectCode(t, err, devices.CodeInDoubt)
	r.mustApply(t, modbus.OpWrite, `{"i16":2}`, 1)
	if got := r.plc.Holding(10, 2); got[0] != 1 || got[1] != 2 {
		t.Fatalf("registers %v, want both writes applied", got)
	}
}

// TestUnplugAndRecovery: the port goes away (state unavailable, commands
// device_unavailable, nothing sent) and comes back at the same link; the
// driver reopens it without being reopened itself.
func TestUnplugAndRecovery(t *testing.T) {
	r := newRig(t, modbus.RTU, simmodbus.Config{}, nil)
	avail := make(chan bool, 16)
	r.dev.OnAvailability(func(ok bool, _ string) { avail <- ok })
	r.mustApply(t, modbus.OpWrite, `{"u16":1}`, 1)
	r.rtu.Unplug()
	waitAvail(t, avail, false)
	_, err := r.apply(t, modbus.OpWrite, `{"u16":2}`, 1)
	expectCode(t, err, devices.CodeDeviceUnavailable)
	if err := r.rtu.Plug(); err != nil {
		t.Fatal(err)
	}
	waitAvail(t, avail, true)
	r.mustApply(t, modbus.OpWrite, `{"u16":3}`, 1)
	if v := r.plc.Holding(10, 1)[0]; v != 3 {
		t.Fatalf("register %d, want 3 (2 was never sent)", v)
	}
}

func waitAvail(t *testing.T, ch <-chan bool, want bool) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-timeout:
			t.Fatalf("availability never became %v", want)
		}
	}
}

// TestTCPServerGoneAndBack: the server goes away (device_unavailable,
// availability false) and comes back on the same address (available,
// commands apply) without reopening the driver.
func TestTCPServerGoneAndBack(t *testing.T) {
	r := newRig(t, modbus.TCP, simmodbus.Config{}, nil)
	avail := make(chan bool, 16)
	r.dev.OnAvailability(func(ok bool, _ string) { avail <- ok })
	r.mustApply(t, modbus.OpWrite, `{"u16":1}`, 1)
	r.tcp.Close()
	// A read finds the connection closed (by the idle check, before it
	// sends, or by its EOF after) and no server to reconnect to.
	_, err := r.apply(t, modbus.OpRead, `{"points":["u16"]}`, 1)
	expectCode(t, err, devices.CodeDeviceUnavailable)
	waitAvail(t, avail, false)
	_, err = r.apply(t, modbus.OpWrite, `{"u16":2}`, 1)
	expectCode(t, err, devices.CodeDeviceUnavailable)
	s, err := simmodbus.ServeTCP(r.plc, r.cfg.TCP.Address)
	if err != nil {
		t.Fatal(err)
	}
	r.tcp = s
	waitAvail(t, avail, true)
	r.mustApply(t, modbus.OpWrite, `{"u16":3}`, 1)
	if v := r.plc.Holding(10, 1)[0]; v != 3 {
		t.Fatalf("register %d, want 3", v)
	}
}

// TestSecondOpenerRefused: the RTU port is held exclusively.
func TestSecondOpenerRefused(t *testing.T) {
	r := newRig(t, modbus.RTU, simmodbus.Config{}, nil)
	d, err := modbus.Open("intruder", r.cfg, nil)
	if err == nil {
		d.Close()
	}
	if !errors.Is(err, serial.ErrHeld) {
		t.Fatalf("second open: %v, want ErrHeld", err)
	}
}

// TestRawOps: raw_read and raw_write address registers and coils by
// number when enabled; a raw write may not touch the fence registers.
func TestRawOps(t *testing.T) {
	r := newRig(t, modbus.TCP, simmodbus.Config{Fence: &simmodbus.Fence{Address: 1000}}, func(c *modbus.Config) {
		c.RawOps, c.Fence = true, &modbus.FenceConfig{Address: ip(1000)}
	})
	r.mustApply(t, modbus.OpRawWrite, `{"table":"holding","address":500,"values":[1,2,65535]}`, 1)
	r.mustApply(t, modbus.OpRawWrite, `{"table":"coil","address":7,"values":[true,false,true]}`, 1)
	if out := r.mustApply(t, modbus.OpRawRead, `{"table":"holding","address":500,"count":3}`, 1); string(out) != `{"values":[1,2,65535]}` {
		t.Fatalf("raw_read holding %s", out)
	}
	if out := r.mustApply(t, modbus.OpRawRead, `{"table":"coil","address":7,"count":3}`, 1); string(out) != `{"values":[true,false,true]}` {
		t.Fatalf("raw_read coils %s", out)
	}
	_, err := r.apply(t, modbus.OpRawWrite, `{"table":"holding","address":998,"values":[0,0,0]}`, 1)
	expectCode(t, err, protocol.CodeBadRequest)
	_, err = r.apply(t, modbus.OpRawWrite, `{"table":"holding","address":1,"values":[70000]}`, 1)
	expectCode(t, err, protocol.CodeBadRequest)
}
