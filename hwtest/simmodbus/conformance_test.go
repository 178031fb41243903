package simmodbus_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/agent"
	"github.com/fencegate/fencegate/hwtest/simmodbus"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/serial"
)

// TestConformance runs every scenario against an agent with a Modbus RTU
// and a Modbus TCP device, end to end through MQTT: simulated PLCs on a
// pseudo-terminal and on loopback TCP, or real devices given by the
// -hwtest.modbus-* flags. Scenarios run in order on one agent; the last
// restarts it with a wiped store.
func TestConformance(t *testing.T) {
	s := newSuite(t)
	s.start()
	t.Cleanup(s.stop)
	t.Run("write_read_every_type", s.everyType)
	t.Run("exception_reaches_result", s.exception)
	t.Run("bad_request_sends_nothing", s.badRequest)
	t.Run("stale_token_rejected_by_agent", s.staleByAgent)
	t.Run("timeouts", s.timeouts)
	t.Run("late_response_not_taken", s.lateResponse)
	t.Run("unplug_unavailable_then_recovery", s.unplug)
	t.Run("second_opener_refused", s.secondOpener)
	t.Run("stale_token_rejected_by_plc_after_store_wipe", s.staleByPLC)
}

// both runs f for the RTU and the TCP target.
func (s *suite) both(t *testing.T, f func(t *testing.T, tg target)) {
	for _, tg := range []target{s.rtu, s.tcp} {
		t.Run(tg.dev, func(t *testing.T) { f(t, tg) })
	}
}

const everyValue = `{"u16":65535,"i16":-2,"u32":305419896,"u32lo":305419896,"i32":-100000,"i32lo":-100000,"f32":1.5,"f32lo":-0.1,"speed":12.3,"run":true,"dir":false}`

func (s *suite) everyType(t *testing.T) {
	s.both(t, func(t *testing.T, tg target) {
		expect(t, s.send(t, tg, tg.dev+"-w", "write", everyValue), protocol.StatusApplied, protocol.CodeOK)
		r := s.send(t, tg, tg.dev+"-r", "read", `{"points":["u16","i16","u32","u32lo","i32","i32lo","f32","f32lo","speed","run","dir"]}`)
		expect(t, r, protocol.StatusApplied, protocol.CodeOK)
		want := `{"dir":false,"f32":1.5,"f32lo":-0.1,"i16":-2,"i32":-100000,"i32lo":-100000,"run":true,"speed":12.3,"u16":65535,"u32":305419896,"u32lo":305419896}`
		if string(r.Output) != want {
			t.Fatalf("read %s\nwant %s", r.Output, want)
		}
		if tg.plc == nil {
			return
		}
		if got := fmt.Sprintf("%04x", tg.plc.Holding(0, 15)); got != "[ffff fffe 1234 5678 5678 1234 fffe 7960 7960 fffe 3fc0 0000 cccd bdcc 007b]" {
			t.Fatalf("registers %s", got)
		}
	})
}

func (s *suite) exception(t *testing.T) {
	s.both(t, func(t *testing.T, tg target) {
		r := s.send(t, tg, tg.dev+"-missing", "read", `{"points":["missing"]}`)
		expect(t, r, protocol.StatusFailed, protocol.CodeDeviceError)
		if !strings.Contains(r.Message, "illegal data address") {
			t.Fatalf("message %q does not name the exception", r.Message)
		}
	})
}

func (s *suite) badRequest(t *testing.T) {
	s.both(t, func(t *testing.T, tg target) {
		before := requests(tg)
		// Refused before acceptance (the agent asks the driver's CheckArgs):
		// rejected, no fence raised, nothing journaled, nothing sent.
		r := s.send(t, tg, tg.dev+"-bad", "write", `{"u16":65536}`)
		expect(t, r, protocol.StatusRejected, protocol.CodeBadRequest)
		r = s.send(t, tg, tg.dev+"-ro", "write", `{"missing":1}`)
		expect(t, r, protocol.StatusRejected, protocol.CodeBadRequest)
		if after := requests(tg); after != before {
			t.Fatalf("the device got %d requests for refused args", after-before)
		}
	})
}

// requests is the simulated PLC's request count (-1 on real hardware).
func requests(tg target) int {
	if tg.plc == nil {
		return -1
	}
	return tg.plc.Stats().Requests
}

func writes(tg target) int {
	if tg.plc == nil {
		return -1
	}
	return len(tg.plc.Log())
}

func (s *suite) staleByAgent(t *testing.T) {
	s.both(t, func(t *testing.T, tg target) {
		seq := s.next(tg.domain)
		expect(t, s.sendAt(t, tg, tg.dev+"-new", "write", `{"u16":1}`, 1, seq), protocol.StatusApplied, protocol.CodeOK)
		before := requests(tg)
		r := s.sendAt(t, tg, tg.dev+"-old", "write", `{"u16":2}`, 1, seq-1)
		expect(t, r, protocol.StatusRejected, protocol.CodeStaleToken)
		if r.Fence == nil || r.Fence.Seq != seq {
			t.Fatalf("fence %+v, want the agent's seq %d", r.Fence, seq)
		}
		if after := requests(tg); after != before {
			t.Fatalf("the device got %d requests from a stale holder", after-before)
		}
	})
}

func (s *suite) timeouts(t *testing.T) {
	s.both(t, func(t *testing.T, tg target) {
		p := tg.needSim(t)
		values := &simmodbus.Range{Start: 0, Count: 16} // not the fence: its request goes first
		p.Inject(simmodbus.Fault{Drop: true, Only: values})
		expect(t, s.send(t, tg, tg.dev+"-drop-w", "write", `{"u16":7}`), protocol.StatusInDoubt, protocol.CodeInDoubt)
		p.Inject(simmodbus.Fault{Drop: true, Only: &simmodbus.Range{Start: fenceAddr, Count: 1}})
		r := s.send(t, tg, tg.dev+"-drop-f", "write", `{"u16":9}`)
		expect(t, r, protocol.StatusFailed, protocol.CodeDeviceTimeout) // only the fence went out
		if !strings.Contains(r.Message, "no value was written") {
			t.Fatalf("message %q", r.Message)
		}
		p.Inject(simmodbus.Fault{Drop: true})
		expect(t, s.send(t, tg, tg.dev+"-drop-r", "read", `{"points":["u16"]}`), protocol.StatusFailed, protocol.CodeDeviceTimeout)
		expect(t, s.send(t, tg, tg.dev+"-after", "write", `{"u16":8}`), protocol.StatusApplied, protocol.CodeOK)
		r = s.send(t, tg, tg.dev+"-check", "read", `{"points":["u16"]}`)
		if string(r.Output) != `{"u16":8}` {
			t.Fatalf("read after timeouts %s", r.Output)
		}
	})
}

// lateResponse: a response that comes after the driver gave up is never
// taken for the next request's (RTU has no transaction ids; TCP has).
func (s *suite) lateResponse(t *testing.T) {
	s.both(t, func(t *testing.T, tg target) {
		p := tg.needSim(t)
		p.SetHolding(0, 111)
		p.SetHolding(1, 222)
		p.Inject(simmodbus.Fault{Late: 600 * time.Millisecond})
		expect(t, s.send(t, tg, tg.dev+"-late", "read", `{"points":["u16"]}`), protocol.StatusFailed, protocol.CodeDeviceTimeout)
		r := s.send(t, tg, tg.dev+"-next", "read", `{"points":["i16"]}`)
		expect(t, r, protocol.StatusApplied, protocol.CodeOK)
		if string(r.Output) != `{"i16":222}` {
			t.Fatalf("next read %s, want its own 222 (111 is the late response)", r.Output)
		}
	})
}

func (s *suite) unplug(t *testing.T) {
	tg := s.rtu
	tg.needSim(t)
	tg.rtu.Unplug()
	s.sup.WaitState(t, tg.dev, false)
	expect(t, s.send(t, tg, "unplugged", "write", `{"u16":3}`), protocol.StatusFailed, protocol.CodeDeviceUnavailable)
	if err := tg.rtu.Plug(); err != nil {
		t.Fatal(err)
	}
	s.sup.WaitState(t, tg.dev, true)
	expect(t, s.send(t, tg, "replugged", "write", `{"u16":4}`), protocol.StatusApplied, protocol.CodeOK)
	if v := tg.plc.Holding(0, 1)[0]; v != 4 {
		t.Fatalf("register %d, want 4 (3 was never sent)", v)
	}
}

func (s *suite) secondOpener(t *testing.T) {
	p, err := serial.OpenPort(serial.Config{Path: s.rtu.path})
	if err == nil {
		p.Close()
	}
	if !errors.Is(err, serial.ErrHeld) {
		t.Fatalf("second open of %s = %v, want ErrHeld", s.rtu.path, err)
	}
	cfg := s.cfg
	cfg.Agent.ID, cfg.Agent.DataDir, cfg.MQTT.ClientID = "intruder", t.TempDir(), "intruder"
	if _, err := agent.New(cfg, nil); err == nil || !strings.Contains(err.Error(), "held") {
		t.Fatalf("a second agent on the same port: %v, want a 'port is held' error", err)
	}
}

// staleByPLC: the agent's store is lost, so the agent accepts an old
// token; the PLC's own fence refuses it and nothing is written.
func (s *suite) staleByPLC(t *testing.T) {
	high := map[string]uint64{}
	for _, tg := range []target{s.rtu, s.tcp} {
		high[tg.dev] = s.next(tg.domain)
		expect(t, s.sendAt(t, tg, tg.dev+"-before-wipe", "write", `{"u16":50}`, 1, high[tg.dev]), protocol.StatusApplied, protocol.CodeOK)
	}
	s.stop()
	if err := os.RemoveAll(s.cfg.Agent.DataDir); err != nil {
		t.Fatal(err)
	}
	s.start()
	s.both(t, func(t *testing.T, tg target) {
		before := writes(tg)
		r := s.sendAt(t, tg, tg.dev+"-after-wipe", "write", `{"u16":51,"run":false}`, 1, high[tg.dev]-5)
		expect(t, r, protocol.StatusRejected, protocol.CodeStaleToken)
		if r.Fence == nil || r.Fence.Seq != high[tg.dev] {
			t.Fatalf("fence %+v, want the PLC's seq %d", r.Fence, high[tg.dev])
		}
		if tg.plc == nil {
			return
		}
		if v := tg.plc.Holding(0, 1)[0]; v != 50 || !tg.plc.Coil(0) {
			t.Fatalf("register %d, run %v: the stale holder's values reached the PLC", v, tg.plc.Coil(0))
		}
		if n := writes(tg) - before; n > 1 {
			t.Fatalf("%d writes for a stale command; at most its fence may be written", n)
		}
	})
}
