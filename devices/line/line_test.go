package line

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
)

func TestFactoryErrorsNameKeys(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"unknown key", "port: {path: /dev/null}\nops: [{name: set, reqest: x, ok: OK}]", "devices[0].settings.ops[0].reqest: unknown key"},
		{"no port path", "ops: [{name: set, request: x, ok: OK}]", "devices[0].settings.port.path"},
		{"no ops", "port: {path: /dev/null}", "devices[0].settings.ops"},
		{"bad template", "port: {path: /x}\nops: [{name: set, request: '{{.ch', ok: OK}]", "devices[0].settings.ops[0].request"},
		{"bad ok pattern", "port: {path: /x}\nops: [{name: set, request: x, ok: '(['}]", "devices[0].settings.ops[0].ok"},
		{"bad arg type", "port: {path: /x}\nops: [{name: set, request: x, ok: OK, args: [{name: ch, type: float}]}]", "devices[0].settings.ops[0].args[0].type"},
		{"bad parity", "port: {path: /x, parity: sometimes}\nops: [{name: set, request: x, ok: OK}]", "devices[0].settings.port.parity"},
		{"bad terminator", "port: {path: /x}\nterminator: ';'\nops: [{name: set, request: x, ok: OK}]", "devices[0].settings.terminator"},
		{"min above max", "port: {path: /x}\nops: [{name: set, request: x, ok: OK, args: [{name: ch, type: int, min: 5, max: 1}]}]", "devices[0].settings.ops[0].args[0].max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := devices.Open("line", "ln", devices.Settings{Node: yamlNode(t, tt.doc), Path: "devices[0].settings"}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}

func TestApplyOutcomes(t *testing.T) {
	in := newInstrument(t, map[string]string{
		"SET 1 on":   "OK\r\n",
		"GET? 1":     "VAL 1 on\r\n",
		"SET 2 jam":  "ERR -300 relay 2 jammed\r\n",
		"SET 3 late": "#BUSY\r\n\x07\x01noise\r\nOK\r\n",
	})
	d := mustOpen(t, testConfig(in.path))
	tests := []struct {
		name, op, args, sent string
		code                 devices.Code
		out, msg             string
	}{
		{"set", "set", `{"ch":1,"value":"on"}`, "SET 1 on", "", `{"reply":"OK"}`, ""},
		{"get groups", "get", `{"ch":1}`, "GET? 1", "", `{"ch":"1","reply":"VAL 1 on","value":"on"}`, ""},
		{"device error", "set", `{"ch":2,"value":"jam"}`, "SET 2 jam", devices.CodeDeviceError, "", "relay 2 jammed"},
		{"skips noise", "set", `{"ch":3,"value":"late"}`, "SET 3 late", "", `{"reply":"OK"}`, ""},
		{"timeout", "set", `{"ch":4,"value":"x"}`, "SET 4 x", devices.CodeInDoubt, "", "nothing arrived"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := apply(d, tt.op, tt.args, 500*time.Millisecond)
			if got := in.next(t); got != tt.sent {
				t.Errorf("sent %q, want %q", got, tt.sent)
			}
			if (err == nil) != (tt.code == "") || err != nil && devices.CodeOf(err) != tt.code {
				t.Fatalf("err = %v, want code %q", err, tt.code)
			}
			if tt.msg != "" && !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v, want it to say %q", err, tt.msg)
			}
			if tt.out != "" && string(out) != tt.out {
				t.Errorf("output %s, want %s", out, tt.out)
			}
		})
	}
}

// TestBadArgsSendNothing: refused args never reach the wire; the next
// line the instrument sees is the valid command after them.
func TestBadArgsSendNothing(t *testing.T) {
	in := newInstrument(t, map[string]string{"SET 5 ok": "OK\n"})
	d := mustOpen(t, testConfig(in.path))
	bad := []struct{ name, op, args string }{
		{"missing arg", "set", `{"ch":1}`},
		{"unknown arg", "set", `{"ch":1,"value":"x","extra":1}`},
		{"out of range", "set", `{"ch":9,"value":"x"}`},
		{"not an integer", "set", `{"ch":1.5,"value":"x"}`},
		{"wrong type", "set", `{"ch":"1","value":"x"}`},
		{"line break smuggling", "set", `{"ch":1,"value":"x\nSET 2 y"}`},
		{"pattern", "set", `{"ch":1,"value":"two words"}`},
		{"not an object", "set", `[1]`},
		{"control in rendered request", "raw", `{"text":"a\u0007b"}`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := apply(d, tt.op, tt.args, time.Second)
			if devices.CodeOf(err) != devices.CodeDeviceError {
				t.Fatalf("err = %v, want device_error", err)
			}
		})
	}
	if _, err := apply(d, "set", `{"ch":5,"value":"ok"}`, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := in.next(t); got != "SET 5 ok" {
		t.Fatalf("instrument saw %q first, want the valid command", got)
	}
	if _, err := apply(d, "nope", "", time.Second); devices.CodeOf(err) != devices.CodeUnknownOp {
		t.Fatalf("unknown op: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	in := newInstrument(t, nil)
	caps := mustOpen(t, testConfig(in.path)).Describe()
	if caps.ChecksTokens || !caps.Ops["get"].Idempotent || caps.Ops["set"].Idempotent || len(caps.Ops) != 3 {
		t.Fatalf("caps = %+v", caps)
	}
}

func TestMatcher(t *testing.T) {
	cfg := testConfig("/x")
	ops, err := compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := ops["get"].match
	tests := []struct {
		line string
		kind Kind
		msg  string
	}{
		{"VAL 3 on", Success, ""},
		{"ERR bad channel", DeviceError, "bad channel"},
		{"VAL 3", Other, ""},
		{"", Other, ""},
	}
	for _, tt := range tests {
		kind, out, msg := m.match(tt.line)
		if kind != tt.kind || msg != tt.msg {
			t.Errorf("match(%q) = %v %q, want %v %q", tt.line, kind, msg, tt.kind, tt.msg)
		}
		if kind == Success {
			b, _ := json.Marshal(out)
			if string(b) != `{"ch":"3","reply":"VAL 3 on","value":"on"}` {
				t.Errorf("output %s", b)
			}
		}
	}
}
