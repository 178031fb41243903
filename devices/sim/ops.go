package sim

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"github.com/fencegate/fencegate/devices"
)

// maxPulseMs bounds pulse's "ms" argument.
const maxPulseMs = 60000

// opSpec is one op as a Device runs it.
type opSpec struct {
	name       string
	idempotent bool
	latency    time.Duration
	prepare    func(args map[string]json.RawMessage) (action, error)
}

// action is a prepared apply: how long the device holds before applying, and
// the effect, run under Device.mu, which returns the op's output.
type action struct {
	hold time.Duration
	run  func(s *state) json.RawMessage
}

// state is what the device holds between commands.
type state struct {
	value json.RawMessage // last value set; nil before the first set
}

// newOpSpecs builds the op table of cfg (defaults applied).
func newOpSpecs(cfg Config) map[string]opSpec {
	specs := make(map[string]opSpec, len(cfg.Ops))
	for _, oc := range cfg.Ops {
		lat := oc.Latency
		if lat == 0 {
			lat = cfg.Latency
		}
		specs[oc.Name] = opSpec{name: oc.Name, idempotent: oc.Idempotent, latency: lat, prepare: preparer(oc.Name)}
	}
	return specs
}

func preparer(name string) func(map[string]json.RawMessage) (action, error) {
	switch name {
	case "set":
		return prepareSet
	case "get":
		return prepareGet
	case "pulse":
		return preparePulse
	}
	return func(map[string]json.RawMessage) (action, error) {
		return action{run: func(*state) json.RawMessage { return nil }}, nil
	}
}

func prepareSet(args map[string]json.RawMessage) (action, error) {
	if err := onlyKeys("set", args, "value"); err != nil {
		return action{}, err
	}
	v, ok := args["value"]
	if !ok {
		return action{}, devices.Errorf(devices.CodeDeviceError, `set: args.value is required`)
	}
	return action{run: func(s *state) json.RawMessage {
		s.value = v
		return valueOutput(v)
	}}, nil
}

func prepareGet(args map[string]json.RawMessage) (action, error) {
	if err := onlyKeys("get", args); err != nil {
		return action{}, err
	}
	return action{run: func(s *state) json.RawMessage { return valueOutput(s.value) }}, nil
}

func preparePulse(args map[string]json.RawMessage) (action, error) {
	if err := onlyKeys("pulse", args, "ms"); err != nil {
		return action{}, err
	}
	raw, ok := args["ms"]
	var ms int64
	if !ok || json.Unmarshal(raw, &ms) != nil || ms < 0 || ms > maxPulseMs {
		return action{}, devices.Errorf(devices.CodeDeviceError,
			"pulse: args.ms must be a non-negative integer ≤ %d, got %s", maxPulseMs, orAbsent(raw))
	}
	out, _ := json.Marshal(map[string]int64{"pulsed_ms": ms})
	return action{
		hold: time.Duration(ms) * time.Millisecond,
		run:  func(*state) json.RawMessage { return out },
	}, nil
}

// parseArgs decodes a command's args, which must be a JSON object or absent
// (empty or null); absent args are an empty map.
func parseArgs(op string, raw json.RawMessage) (map[string]json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return map[string]json.RawMessage{}, nil
	}
	var args map[string]json.RawMessage
	if trimmed[0] != '{' || json.Unmarshal(trimmed, &args) != nil {
		return nil, devices.Errorf(devices.CodeDeviceError,
			"%s: args must be a JSON object, got %s", op, clip(trimmed))
	}
	return args, nil
}

// onlyKeys rejects args keys other than allowed.
func onlyKeys(op string, args map[string]json.RawMessage, allowed ...string) error {
	for k := range args {
		if !slices.Contains(allowed, k) {
			return devices.Errorf(devices.CodeDeviceError,
				"%s: unknown arg %q (known: %v)", op, k, allowed)
		}
	}
	return nil
}

// valueOutput returns {"value": v}, v compacted, null if v is nil.
func valueOutput(v json.RawMessage) json.RawMessage {
	out, err := json.Marshal(map[string]json.RawMessage{"value": v})
	if err != nil { // v came from a valid JSON object, so this cannot happen
		panic("sim: marshal value: " + err.Error())
	}
	return out
}

func orAbsent(raw json.RawMessage) string {
	if raw == nil {
		return "nothing"
	}
	return clip(raw)
}

// clip shortens raw JSON for an error message.
func clip(raw []byte) string {
	const max = 64
	if len(raw) > max {
		return string(raw[:max]) + "…"
	}
	return string(raw)
}
