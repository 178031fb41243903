package agent

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/protocol"
)

// argsCheckingSim is a sim device that refuses, before any I/O, a set whose
// value is the string "bad" (as a Modbus driver refuses an unknown point).
type argsCheckingSim struct{ *sim.Device }

func (d argsCheckingSim) CheckArgs(op string, args json.RawMessage) error {
	if op == "set" && bytes.Contains(args, []byte(`"bad"`)) {
		return devices.Errorf(protocol.CodeBadRequest, "value \"bad\" is not one the device can hold")
	}
	return nil
}

func init() {
	devices.Register("test-argscheck", func(device string, s devices.Settings, log *slog.Logger) (devices.Driver, error) {
		var cfg sim.Config
		if s.Node != nil {
			if err := s.Node.Decode(&cfg); err != nil {
				return nil, err
			}
		}
		d, err := sim.New(device, cfg, log)
		if err != nil {
			return nil, err
		}
		return argsCheckingSim{d}, nil
	})
}

// A command whose args the driver refuses up front (devices.ArgsChecker)
// is answered bad_request before it is accepted: it raises no fence, is
// not journaled and never reaches the device (issue: "bad_request before
// the command is accepted").
func TestArgsRefusedByDriverBeforeAcceptance(t *testing.T) {
	h := newHarness(t)
	h.cfg.Devices = append(h.cfg.Devices, DeviceConfig{ID: "vfd1", Domain: "plant", Driver: "test-argscheck",
		Settings: simSettings(t, "log: "+filepath.Join(h.dir, "vfd1.log"))})
	h.start()
	bad := protocol.Command{ID: "b1", Token: h.token(9, "A"), Op: "set", Args: json.RawMessage(`{"value":"bad"}`)}
	wantResult(t, h.sup.Send(t, "vfd1", bad), protocol.StatusRejected, protocol.CodeBadRequest)
	if _, known, err := h.agent.env.store.Lookup("vfd1", "b1"); known || err != nil || h.domainSeq("plant") != 0 {
		t.Fatalf("refused command journaled (%v, %v) or fence raised to %d", known, err, h.domainSeq("plant"))
	}
	wantResult(t, h.sup.Send(t, "vfd1", set("g1", h.token(9, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
}

// refuseAllArgs makes the "test-argscheck-flip" driver refuse every
// command's args while it is set.
var refuseAllArgs atomic.Bool

// flipCheckingSim refuses every command's args while refuseAllArgs is set
// (as a driver whose point map was reloaded without the point would).
type flipCheckingSim struct{ *sim.Device }

func (d flipCheckingSim) CheckArgs(string, json.RawMessage) error {
	if refuseAllArgs.Load() {
		return devices.Errorf(protocol.CodeBadRequest, "the device refuses every set now")
	}
	return nil
}

func init() {
	devices.Register("test-argscheck-flip", func(device string, s devices.Settings, log *slog.Logger) (devices.Driver, error) {
		d, err := sim.New(device, sim.Config{}, log)
		if err != nil {
			return nil, err
		}
		return flipCheckingSim{d}, nil
	})
}

// A retry of a journaled command gets its journaled answer even when the
// driver's args check would refuse the command now: the check is asked
// first (no store read for a command it takes), and its refusal counts
// only for a command the journal does not hold.
func TestArgsRefusalDoesNotOverrideJournaledAnswer(t *testing.T) {
	t.Cleanup(func() { refuseAllArgs.Store(false) })
	h := newHarness(t)
	h.cfg.Devices = append(h.cfg.Devices, DeviceConfig{ID: "vfd2", Domain: "plant", Driver: "test-argscheck-flip"})
	h.start()
	first := set("j1", h.token(3, "A"), 7)
	wantResult(t, h.sup.Send(t, "vfd2", first), protocol.StatusApplied, protocol.CodeOK)
	refuseAllArgs.Store(true)
	retry := h.sup.Send(t, "vfd2", first)
	wantResult(t, retry, protocol.StatusApplied, protocol.CodeOK)
	if !retry.Duplicate {
		t.Fatalf("retry of a journaled command answered afresh: %+v", retry)
	}
	fresh := h.sup.Send(t, "vfd2", set("j2", h.token(3, "A"), 8))
	wantResult(t, fresh, protocol.StatusRejected, protocol.CodeBadRequest)
	if _, known, err := h.agent.env.store.Lookup("vfd2", "j2"); known || err != nil {
		t.Fatalf("refused command journaled (%v, %v)", known, err)
	}
}
