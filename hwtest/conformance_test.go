package hwtest

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/agent"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/serial"
)

// TestConformance runs every scenario against an agent with a frame and a
// line device, end to end through MQTT. Scenarios run in order on one
// agent; the last one restarts it with a wiped store.
func TestConformance(t *testing.T) {
	s := newSuite(t)
	s.start()
	t.Cleanup(s.stop)
	t.Run("apply_ok", s.applyOK)
	t.Run("device_error_reaches_result", s.deviceError)
	t.Run("stale_token_rejected_by_agent", s.staleByAgent)
	t.Run("garbage_survived_and_reported", s.garbage)
	t.Run("garbled_reply_resent_not_reapplied", s.garbledReply)
	t.Run("reply_timeout", s.replyTimeout)
	t.Run("stalled_line_delivers_no_timed_out_frame", s.stalledLine)
	t.Run("unplug_unavailable_then_recovery", s.unplug)
	t.Run("second_opener_refused", s.secondOpener)
	t.Run("stale_token_rejected_by_firmware_after_store_wipe", s.staleByFirmware)
}

// expect fails t unless r has status and code.
func expect(t *testing.T, r protocol.Result, status protocol.Status, code protocol.Code) {
	t.Helper()
	if r.Status != status || r.Code != code {
		t.Fatalf("result %s: %s/%s (%s), want %s/%s", r.ID, r.Status, r.Code, r.Message, status, code)
	}
}

// applied returns the simulator's applied count, or -1 on real hardware.
func applied(t *testing.T, tg target) int {
	t.Helper()
	if tg.sim == nil {
		return -1
	}
	st, err := tg.sim.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.Applied
}

// expectApplied checks the simulator applied want commands since before.
func expectApplied(t *testing.T, tg target, before, want int) {
	t.Helper()
	if got := applied(t, tg); before >= 0 && got-before != want {
		t.Fatalf("%s applied %d commands, want %d", tg.dev, got-before, want)
	}
}

func (s *suite) applyOK(t *testing.T) {
	before := applied(t, s.fw)
	r := s.send(t, s.fw, "ok-set", "set", `{"value":"on"}`)
	expect(t, r, protocol.StatusApplied, protocol.CodeOK)
	r = s.send(t, s.fw, "ok-get", "get", "")
	expect(t, r, protocol.StatusApplied, protocol.CodeOK)
	if string(r.Output) != `{"value":"on"}` {
		t.Fatalf("frame get output %s", r.Output)
	}
	expectApplied(t, s.fw, before, 2)

	r = s.send(t, s.ln, "ok-lset", "set", `{"ch":3,"value":"on"}`)
	expect(t, r, protocol.StatusApplied, protocol.CodeOK)
	r = s.send(t, s.ln, "ok-lget", "get", `{"ch":3}`)
	expect(t, r, protocol.StatusApplied, protocol.CodeOK)
	if !strings.Contains(string(r.Output), `"value":"on"`) {
		t.Fatalf("line get output %s", r.Output)
	}
}

func (s *suite) deviceError(t *testing.T) {
	if s.fw.sim != nil { // the reference firmware's set needs a value
		r := s.send(t, s.fw, "err-fw", "set", `{}`)
		expect(t, r, protocol.StatusFailed, protocol.CodeDeviceError)
	}
	r := s.send(t, s.ln, "err-ln", "set", `{"ch":8,"value":"x"}`)
	expect(t, r, protocol.StatusFailed, protocol.CodeDeviceError)
	if !strings.Contains(r.Message, "channel 8 is read-only") {
		t.Fatalf("message %q does not carry the device's error text", r.Message)
	}
}

func (s *suite) staleByAgent(t *testing.T) {
	for _, tg := range []target{s.fw, s.ln} {
		t.Run(tg.dev, func(t *testing.T) {
			seq := s.next(tg.domain)
			args := map[string]string{frameDev: `{"value":1}`, lineDev: `{"ch":2,"value":"a"}`}[tg.dev]
			expect(t, s.sendSeq(t, tg, tg.dev+"-new", "set", args, seq), protocol.StatusApplied, protocol.CodeOK)
			before := applied(t, tg)
			r := s.sendSeq(t, tg, tg.dev+"-old", "set", args, seq-1)
			expect(t, r, protocol.StatusRejected, protocol.CodeStaleToken)
			if r.Fence == nil || r.Fence.Seq != seq {
				t.Fatalf("fence %+v, want seq %d", r.Fence, seq)
			}
			expectApplied(t, tg, before, 0)
		})
	}
}

func (s *suite) garbage(t *testing.T) {
	for _, tg := range []target{s.fw, s.ln} {
		t.Run(tg.dev, func(t *testing.T) {
			sim := tg.needSim(t)
			for _, fault := range []string{"junk", "noise"} {
				if _, err := sim.Do(fault); err != nil {
					t.Fatal(err)
				}
			}
			args := map[string]string{frameDev: `{"value":"g"}`, lineDev: `{"ch":4,"value":"g"}`}[tg.dev]
			expect(t, s.send(t, tg, tg.dev+"-noisy", "set", args), protocol.StatusApplied, protocol.CodeOK)
			// the half message left after the reply must not spoil the next one
			expect(t, s.send(t, tg, tg.dev+"-after-noise", "set", args), protocol.StatusApplied, protocol.CodeOK)
			if !s.logged(tg.dev, "garbled input") {
				t.Fatalf("the garbage was not reported in the agent's log for %s:\n%s", tg.dev, s.logs.String())
			}
		})
	}
}

func (s *suite) garbledReply(t *testing.T) {
	sim := s.fw.needSim(t)
	before := applied(t, s.fw)
	if _, err := sim.Do("garble"); err != nil {
		t.Fatal(err)
	}
	r := s.send(t, s.fw, "garbled", "set", `{"value":"once"}`)
	expect(t, r, protocol.StatusApplied, protocol.CodeOK)
	expectApplied(t, s.fw, before, 1)
}

func (s *suite) replyTimeout(t *testing.T) {
	tests := []struct {
		tg          target
		fault, args string
	}{
		{s.fw, "drop", `{"value":"t"}`},
		{s.fw, "delay 5s", `{"value":"t"}`},
		{s.ln, "drop", `{"ch":5,"value":"t"}`},
	}
	for i, tt := range tests {
		t.Run(tt.tg.dev+"-"+strings.Fields(tt.fault)[0], func(t *testing.T) {
			sim := tt.tg.needSim(t)
			if _, err := sim.Do(tt.fault); err != nil {
				t.Fatal(err)
			}
			r := s.send(t, tt.tg, fmt.Sprintf("timeout-%d", i), "set", tt.args)
			expect(t, r, protocol.StatusInDoubt, protocol.CodeInDoubt) // the request went out: it may have been applied
			if err := sim.WaitIdle(20 * time.Second); err != nil {     // the late reply has gone out
				t.Fatal(err)
			}
			expect(t, s.send(t, tt.tg, fmt.Sprintf("after-timeout-%d", i), "set", tt.args), protocol.StatusApplied, protocol.CodeOK)
		})
	}
}

// stalledLine: the line toward the firmware stops carrying bytes (as with
// CTS low); a command sent meanwhile is in_doubt, and once the line
// resumes it never reaches the firmware — only the next command does.
func (s *suite) stalledLine(t *testing.T) {
	sim := s.fw.needSim(t)
	if _, err := sim.Do("stall"); err != nil {
		t.Skipf("the simulator cannot stall its line here: %v", err)
	}
	before := applied(t, s.fw)
	r := s.send(t, s.fw, "stalled", "set", `{"value":"late"}`)
	expect(t, r, protocol.StatusInDoubt, protocol.CodeInDoubt)
	if _, err := sim.Do("resume"); err != nil {
		t.Fatal(err)
	}
	expect(t, s.send(t, s.fw, "after-stall", "set", `{"value":"now"}`), protocol.StatusApplied, protocol.CodeOK)
	expectApplied(t, s.fw, before, 1)
	if st, err := sim.Stats(); err != nil || string(st.Values["value"]) != `"now"` {
		t.Fatalf("firmware value %s (%v), want \"now\"", st.Values["value"], err)
	}
}

func (s *suite) unplug(t *testing.T) {
	for _, tg := range []target{s.fw, s.ln} {
		t.Run(tg.dev, func(t *testing.T) {
			sim := tg.needSim(t)
			args := map[string]string{frameDev: `{"value":"u"}`, lineDev: `{"ch":6,"value":"u"}`}[tg.dev]
			if _, err := sim.Do("unplug"); err != nil {
				t.Fatal(err)
			}
			s.sup.WaitState(t, tg.dev, false)
			r := s.send(t, tg, tg.dev+"-unplugged", "set", args)
			expect(t, r, protocol.StatusFailed, protocol.CodeDeviceUnavailable)
			if _, err := sim.Do("plug"); err != nil {
				t.Fatal(err)
			}
			s.sup.WaitState(t, tg.dev, true)
			expect(t, s.send(t, tg, tg.dev+"-replugged", "set", args), protocol.StatusApplied, protocol.CodeOK)
		})
	}
}

func (s *suite) secondOpener(t *testing.T) {
	for _, tg := range []target{s.fw, s.ln} {
		p, err := serial.OpenPort(serial.Config{Path: tg.path})
		if err == nil {
			p.Close()
		}
		if !errors.Is(err, serial.ErrHeld) {
			t.Fatalf("second open of %s = %v, want ErrHeld", tg.path, err)
		}
	}
	cfg := s.cfg
	cfg.Agent.ID, cfg.Agent.DataDir = "intruder", t.TempDir()
	cfg.MQTT.ClientID = "intruder"
	_, err := agent.New(cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "held") {
		t.Fatalf("a second agent on the same ports: %v, want a 'port is held' error", err)
	}
}

// staleByFirmware: the agent's store is lost, so the agent accepts an old
// token; the firmware's own fence refuses it.
func (s *suite) staleByFirmware(t *testing.T) {
	high := s.next(frameDomain)
	expect(t, s.sendSeq(t, s.fw, "before-wipe", "set", `{"value":"w"}`, high), protocol.StatusApplied, protocol.CodeOK)
	s.stop()
	if err := os.RemoveAll(s.cfg.Agent.DataDir); err != nil {
		t.Fatal(err)
	}
	s.start()
	before := applied(t, s.fw)
	r := s.sendSeq(t, s.fw, "after-wipe", "set", `{"value":"old"}`, high-5)
	expect(t, r, protocol.StatusRejected, protocol.CodeStaleToken)
	if r.Fence == nil || r.Fence.Seq != high || r.Fence.Holder != "sup" {
		t.Fatalf("fence %+v, want the firmware's seq %d", r.Fence, high)
	}
	expectApplied(t, s.fw, before, 0)
	if s.fw.sim == nil {
		return
	}
	if st, _ := s.fw.sim.Stats(); st.Fences[frameDomain].Seq != high {
		t.Fatalf("firmware fence %+v, want seq %d", st.Fences[frameDomain], high)
	}
}

// logged reports whether a line of the agent's log is about dev and says msg.
func (s *suite) logged(dev, msg string) bool {
	for _, l := range strings.Split(s.logs.String(), "\n") {
		if strings.Contains(l, "device="+dev+" ") && strings.Contains(l, msg) {
			return true
		}
	}
	return false
}
