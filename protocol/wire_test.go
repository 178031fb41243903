package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// TestProtocolV1WireGolden pins the JSON of protocol v1's messages: a
// rename of a Go field or type must not change a byte on the wire.
func TestProtocolV1WireGolden(t *testing.T) {
	f := &fence.Fence{Epoch: 3, Seq: 7, Holder: "sup-a"}
	tests := []struct {
		name string
		msg  any
		want string
	}{
		{"command", protocol.Command{ID: "c1", Token: "tok", Op: "set", Args: json.RawMessage(`{"v":1}`),
			ReplyTo: "fencegate/v1/replies/sup-a", DeadlineMs: 1700000000000},
			`{"id":"c1","token":"tok","op":"set","args":{"v":1},"reply_to":"fencegate/v1/replies/sup-a","deadline_ms":1700000000000}`},
		{"command minimal", protocol.Command{ID: "c1", Token: "tok", Op: "get"},
			`{"id":"c1","token":"tok","op":"get"}`},
		{"result", protocol.Result{ID: "c1", Device: "pump1", Status: protocol.StatusRejected, Code: protocol.CodeStaleToken,
			Message: "newer", Fence: f, Output: json.RawMessage(`{"x":2}`), At: "2026-01-02T03:04:05Z"},
			`{"id":"c1","device":"pump1","status":"rejected","code":"stale_token","message":"newer","duplicate":false,` +
				`"fence":{"epoch":3,"seq":7,"holder":"sup-a"},"output":{"x":2},"at":"2026-01-02T03:04:05Z"}`},
		{"device state", protocol.DeviceState{Device: "pump1", Domain: "plant", Agent: "a1", Online: true, Fence: f,
			UpdatedAt: "2026-01-02T03:04:05Z"},
			`{"device":"pump1","domain":"plant","agent":"a1","online":true,` +
				`"fence":{"epoch":3,"seq":7,"holder":"sup-a"},"updated_at":"2026-01-02T03:04:05Z"}`},
		{"agent status", protocol.AgentStatus{Online: false, At: "2026-01-02T03:04:05Z"},
			`{"online":false,"at":"2026-01-02T03:04:05Z"}`},
		{"grant", protocol.Grant{Token: "tok"}, `{"token":"tok"}`},
		{"lease request", protocol.Request{RequestID: "r1", ReplyTo: "fencegate/v1/replies/sup-a", Holder: "sup-a",
			TTLms: 5000, WaitMs: 100, Token: "tok"},
			`{"request_id":"r1","reply_to":"fencegate/v1/replies/sup-a","holder":"sup-a","ttl_ms":5000,"wait_ms":100,"token":"tok"}`},
		{"lease response", protocol.Response{RequestID: "r1", OK: true, Code: protocol.CodeGranted, Token: "tok",
			Holder: "sup-a", ExpiresInMs: 5000, WaitedMs: 12},
			`{"request_id":"r1","ok":true,"code":"granted","token":"tok","holder":"sup-a","expires_in_ms":5000,"waited_ms":12}`},
		{"lease response minimal", protocol.Response{Code: protocol.CodeBadRequest, Message: "no"},
			`{"request_id":"","ok":false,"code":"bad_request","message":"no"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.msg)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if string(b) != tc.want {
				t.Fatalf("wire form changed:\n got %s\nwant %s", b, tc.want)
			}
		})
	}
}

// TestProtocolV1CodesGolden pins every code's string and the metric lists:
// codes are on the wire and are Prometheus label values.
func TestProtocolV1CodesGolden(t *testing.T) {
	tests := []struct {
		name  string
		codes []protocol.Code
		want  string
	}{
		{"result codes", protocol.ResultCodes, "ok stale_token invalid_token wrong_domain bad_request expired unknown_op " +
			"device_error device_timeout device_unavailable busy in_doubt internal"},
		{"lease codes", protocol.LeaseCodes, "granted renewed released held not_holder expired bad_request busy internal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range tc.codes {
				got = append(got, string(c))
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Fatalf("codes changed:\n got %s\nwant %s", s, tc.want)
			}
		})
	}
}

// TestProtocolV1TopicsGolden pins the topic strings under the default prefix.
func TestProtocolV1TopicsGolden(t *testing.T) {
	var tp protocol.Topics
	got := strings.Join([]string{tp.DeviceCommands("d"), tp.DeviceResults("d"), tp.DeviceState("d"),
		tp.AgentStatus("a"), tp.Lease("x", string(protocol.OpAcquire)), tp.LeaseGrant("x"),
		tp.AllDeviceCommands(), tp.AllLeaseOps(), tp.Replies(), tp.ReplyTopic("c")}, " ")
	want := "fencegate/v1/devices/d/commands fencegate/v1/devices/d/results fencegate/v1/devices/d/state " +
		"fencegate/v1/agents/a/status fencegate/v1/leases/x/acquire fencegate/v1/leases/x/grant " +
		"fencegate/v1/devices/+/commands fencegate/v1/leases/+/+ fencegate/v1/replies/ fencegate/v1/replies/c"
	if got != want {
		t.Fatalf("topics changed:\n got %s\nwant %s", got, want)
	}
}
