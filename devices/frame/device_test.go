package frame

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/transport/serial"
)

func TestApplyOutcomes(t *testing.T) {
	fw := newFirmware(t, func(r Request) []byte {
		switch r.ID {
		case "ok":
			return reply(r, StatusApplied, `{"value":"on"}`)
		case "stale":
			b, _ := Reply{ID: r.ID, Status: StatusStale, Epoch: 7, Seq: 50, Holder: "sup-b"}.Marshal()
			return serial.EncodeFrame(b)
		case "err":
			return reply(r, StatusError, "relay jammed")
		case "noise":
			return append([]byte("\xde\xad\x00\x13"), reply(r, StatusApplied, "")...)
		case "late":
			return append(reply(Request{ID: "earlier"}, StatusApplied, ""), reply(r, StatusApplied, `{"n":1}`)...)
		case "raw":
			return reply(r, StatusApplied, "not json")
		}
		return nil // "silent": no reply
	})
	d := mustOpen(t, fw.path)
	tests := []struct {
		id   string
		code devices.Code
		out  string
		msg  string
	}{
		{"ok", "", `{"value":"on"}`, ""},
		{"stale", devices.CodeStaleToken, "", "seq 50"},
		{"err", devices.CodeDeviceError, "", "relay jammed"},
		{"noise", "", "", ""},
		{"late", "", `{"n":1}`, ""},
		{"raw", "", `{"raw":"not json"}`, ""},
		{"silent", devices.CodeInDoubt, "", "no valid reply"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			out, err := apply(d, cmd(tt.id, "set", `{"value":"on"}`, 3), 500*time.Millisecond)
			if e := errOf(err); e.Code != tt.code || (err == nil) != (tt.code == "") {
				t.Fatalf("err = %v, want code %q", err, tt.code)
			}
			if tt.msg != "" && !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err %v does not say %q", err, tt.msg)
			}
			if string(out) != tt.out {
				t.Errorf("output %s, want %s", out, tt.out)
			}
		})
	}
}

func TestStaleCarriesFirmwareFence(t *testing.T) {
	fw := newFirmware(t, func(r Request) []byte {
		b, _ := Reply{ID: r.ID, Status: StatusStale, Epoch: 7, Seq: 50, Holder: "sup-b"}.Marshal()
		return serial.EncodeFrame(b)
	})
	d := mustOpen(t, fw.path)
	_, err := apply(d, cmd("c", "get", "", 3), 2*time.Second)
	e := errOf(err)
	if e.Code != devices.CodeStaleToken || e.Fence == nil || e.Fence.Seq != 50 || e.Fence.Holder != "sup-b" {
		t.Fatalf("err = %+v (fence %+v), want stale_token with the firmware's fence", err, e.Fence)
	}
	req := <-fw.reqs
	if req.Domain != "plant" || req.Epoch != 7 || req.Seq != 3 || req.Holder != "sup-a" || req.Op != "get" {
		t.Fatalf("firmware received %+v", req)
	}
}

// TestGarbledReplyIsResent: the first answer is corrupted, the driver
// resends the same id and takes the second.
func TestGarbledReplyIsResent(t *testing.T) {
	n := 0
	fw := newFirmware(t, func(r Request) []byte {
		n++
		b := reply(r, StatusApplied, `{"n":1}`)
		if n == 1 {
			b[4] ^= 0x55
		}
		return b
	})
	d := mustOpen(t, fw.path)
	out, err := apply(d, cmd("g1", "get", "", 3), 5*time.Second)
	if err != nil || string(out) != `{"n":1}` {
		t.Fatalf("Apply = %s, %v", out, err)
	}
	first, second := <-fw.reqs, <-fw.reqs
	if first.ID != "g1" || second.ID != "g1" {
		t.Fatalf("requests %q, %q; want the same id twice", first.ID, second.ID)
	}
}

func TestUnknownOpAndOversize(t *testing.T) {
	fw := newFirmware(t, func(r Request) []byte { return nil })
	d := mustOpen(t, fw.path)
	if _, err := apply(d, cmd("u", "fly", "", 3), time.Second); errOf(err).Code != devices.CodeUnknownOp {
		t.Fatalf("unknown op: %v", err)
	}
	big := `{"value":"` + strings.Repeat("x", MaxPayload) + `"}`
	if _, err := apply(d, cmd("b", "set", big, 3), time.Second); errOf(err).Code != devices.CodeBadRequest {
		t.Fatalf("oversize: %v, want bad_request (nothing was sent)", err)
	}
	select {
	case r := <-fw.reqs:
		t.Fatalf("firmware received %+v; refused commands must not be sent", r)
	default:
	}
}

func TestFactoryErrorsNameKeys(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"unknown key", "port: {path: /x}\nopz: []", "devices[1].settings.opz: unknown key"},
		{"no path", "ops: [{name: set}]", "devices[1].settings.port.path"},
		{"bad op name", "port: {path: /x}\nops: [{name: 'a b'}]", "devices[1].settings.ops[0].name"},
		{"bad baud type", "port: {path: /x, baud: fast}", "devices[1].settings.port.baud"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n yaml.Node
			if err := yaml.Unmarshal([]byte(tt.doc), &n); err != nil {
				t.Fatal(err)
			}
			_, err := devices.Open("frame", "fw", devices.Settings{Node: n.Content[0], Path: "devices[1].settings"}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}
