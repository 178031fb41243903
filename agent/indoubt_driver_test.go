package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/protocol"
)

// losingSim is a sim device that loses the device mid-command for op
// "jog": the command may have left, so the driver answers in_doubt.
type losingSim struct{ *sim.Device }

func (d losingSim) Describe() devices.Capabilities {
	c := d.Device.Describe()
	c.Ops["jog"] = devices.Op{}
	return c
}

// CheckArgs admits "jog", which the sim does not know, and leaves the
// rest to the sim.
func (d losingSim) CheckArgs(op string, args json.RawMessage) error {
	if op == "jog" {
		return nil
	}
	return d.Device.CheckArgs(op, args)
}

func (d losingSim) Apply(ctx context.Context, cmd devices.Command) (json.RawMessage, error) {
	if cmd.Op == "jog" {
		return nil, devices.Errorf(devices.CodeInDoubt, "link lost after the frame was written")
	}
	return d.Device.Apply(ctx, cmd)
}

func init() {
	devices.Register("test-losing", func(device string, s devices.Settings, log *slog.Logger) (devices.Driver, error) {
		d, err := sim.New(device, sim.Config{}, log)
		if err != nil {
			return nil, err
		}
		return losingSim{d}, nil
	})
}

// A driver's in_doubt answer (not only a stop mid-apply) lists the command
// for an operator; resolving it changes what a retry gets.
func TestDriverInDoubtIsListedAndResolvable(t *testing.T) {
	h := newHarness(t)
	h.cfg.Devices = append(h.cfg.Devices, DeviceConfig{ID: "pump1", Domain: "plant", Driver: "test-losing",
		Settings: simSettings(t, "log: "+filepath.Join(h.dir, "unused.log"))})
	h.start()
	cmd := protocol.Command{ID: "j1", Token: h.token(3, "sup-a"), Op: "jog"}
	wantResult(t, h.sup.Send(t, "pump1", cmd), protocol.StatusInDoubt, protocol.CodeInDoubt)
	var list []InDoubtCommand
	getJSON(t, h.url("/v1/indoubt"), &list)
	if len(list) != 1 || list[0].ID != "j1" || list[0].Op != "jog" || list[0].Result == nil ||
		!strings.Contains(list[0].Result.Message, "link lost") {
		t.Fatalf("in-doubt list: %+v", list)
	}
	if g := h.gauge(); g != "1" {
		t.Fatalf("gauge: %s, want 1", g)
	}
	if status, body := h.post("/v1/indoubt/pump1/j1/resolve", "", `{"resolution":"applied","by":"jo"}`); status != 200 {
		t.Fatalf("resolve: %d %s", status, body)
	}
	r := h.sup.Send(t, "pump1", cmd)
	wantResult(t, r, protocol.StatusApplied, protocol.CodeOK)
	if !r.Duplicate {
		t.Fatalf("retry after resolve: %+v, want duplicate", r)
	}
}
