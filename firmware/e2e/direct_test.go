package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/supervisor"
)

// TestDeviceFencesItselfWithoutAgent is the scenario of issue 19 with no
// agent in the path: the device speaks protocol v1 itself. A acquires and
// writes; A stalls past its TTL; B acquires and the device raises its fence
// from the retained grant before B sends anything; A's late write is
// rejected stale_token by the device; the device is killed and restarted
// and still rejects A; a forged token, a tampered one and a token of
// another domain are rejected; nothing but A's first and B's commands was
// ever applied.
func TestDeviceFencesItselfWithoutAgent(t *testing.T) {
	e := newEnv(t)
	dev := e.startDevice(t, "")
	supA, supB := e.dial(t, "sup-a"), e.dial(t, "sup-b")

	tokA := rawAcquire(t, supA, domain, time.Second)
	if r := send(t, supA, tokA.Raw, map[string]any{"state": "ON"}); r.Status != protocol.StatusApplied ||
		string(r.Output) != `{"POWER":"ON"}` {
		t.Fatalf("A's write: %+v", r)
	}

	// A stalls (sends no renewal); B queues for the domain and gets it
	// when A's TTL runs out.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	leaseB, err := supB.Acquire(ctx, domain, supervisor.AcquireOptions{TTL: time.Minute, Wait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tokB := leaseB.Fence()
	if err := leaseB.WaitHandover(ctx, device); err != nil {
		t.Fatalf("the device's fence never reached B's grant: %v", err)
	}

	wantResult(t, "A's late write", send(t, supA, tokA.Raw, map[string]any{"state": "OFF"}), protocol.CodeStaleToken, tokB)

	dev.kill()
	e.startDevice(t, "")
	wantResult(t, "A's write after a restart", send(t, supA, tokA.Raw, map[string]any{"state": "OFF"}), protocol.CodeStaleToken, tokB)

	if r := send(t, supB, tokB.Raw, map[string]any{"state": "OFF"}); r.Status != protocol.StatusApplied {
		t.Fatalf("B's write: %+v", r)
	}
	rejectsBadTokens(t, e, supA, tokB.Raw)
	e.wantApplied(t, tokA, tokB)
}

// rejectsBadTokens sends tokens the device must refuse, each invalid_token
// or wrong_domain, and checks the message names the reason.
func rejectsBadTokens(t *testing.T, e *env, c *supervisor.Client, good string) {
	t.Helper()
	foreign := rawAcquire(t, e.dial(t, "sup-c"), "other", time.Minute)
	tests := []struct {
		name, token string
		code        protocol.Code
		message     string
	}{
		{"forged", forged(t), protocol.CodeInvalidToken, "unknown_key"},
		{"tampered", tampered(good), protocol.CodeInvalidToken, "signature"},
		{"garbage", "fg1.not-a-token", protocol.CodeInvalidToken, "prefix"},
		{"foreign domain", foreign.Raw, protocol.CodeWrongDomain, "domain"},
	}
	for _, tc := range tests {
		r := send(t, c, tc.token, map[string]any{"state": "ON"})
		if r.Code != tc.code || !strings.Contains(r.Message, tc.message) {
			b, _ := json.Marshal(r)
			t.Errorf("%s token: %s, want %s naming %s", tc.name, b, tc.code, tc.message)
		}
	}
}

// TestDeviceAnswersBadInput: the device answers what it cannot obey with a
// result (invariant I6) and applies a retried command once.
func TestDeviceAnswersBadInput(t *testing.T) {
	e := newEnv(t)
	e.startDevice(t, "")
	tok := rawAcquire(t, e.dial(t, "sup-a"), domain, time.Minute)
	cmd := func(id, op, args string) protocol.Command {
		return protocol.Command{ID: id, Token: tok.Raw, Op: op, Args: json.RawMessage(args)}
	}
	e.watcher.PublishRaw(t, device, []byte(`{"id":"j1","token":`))
	if r := e.watcher.Wait(t, ""); r.Code != protocol.CodeBadRequest { // no id can be salvaged
		t.Errorf("malformed JSON: %+v", r)
	}
	e.watcher.PublishRaw(t, device, []byte(`{"id":"u1","token":"`+tok.Raw+`","op":"power","colour":"red"}`))
	if r := e.watcher.Wait(t, "u1"); r.Code != protocol.CodeBadRequest || !strings.Contains(r.Message, "unknown field") {
		t.Errorf("unknown field: %+v", r)
	}
	tests := []struct {
		name string
		cmd  protocol.Command
		code protocol.Code
	}{
		{"unknown op", cmd("o1", "explode", `{}`), protocol.CodeUnknownOp},
		{"bad args", cmd("a1", "power", `{"state":"DIM"}`), protocol.CodeDeviceError},
		{"args not an object", cmd("a2", "power", `[1]`), protocol.CodeBadRequest},
		{"deadline passed", protocol.Command{ID: "d1", Token: tok.Raw, Op: "power", Args: json.RawMessage(`{"state":"ON"}`), DeadlineMs: 1},
			protocol.CodeExpired},
		{"reply_to outside the namespace", protocol.Command{ID: "r1", Token: tok.Raw, Op: "power", ReplyTo: "plant/relays/x"},
			protocol.CodeBadRequest},
	}
	for _, tc := range tests {
		if r := e.watcher.Send(t, device, tc.cmd); r.Code != tc.code {
			t.Errorf("%s: %+v, want %s", tc.name, r, tc.code)
		}
	}
	first := e.watcher.Send(t, device, cmd("p1", "power", `{"state":"ON"}`))
	again := e.watcher.Send(t, device, cmd("p1", "power", `{"state":"ON"}`))
	if first.Status != protocol.StatusApplied || first.Duplicate || again.Status != protocol.StatusApplied || !again.Duplicate {
		t.Fatalf("a retry: first %+v, then %+v; want applied, then the same answer as a duplicate", first, again)
	}
	if r := e.watcher.Send(t, device, cmd("p1", "power", `{"state":"OFF"}`)); r.Code != protocol.CodeBadRequest {
		t.Errorf("id reused for another command: %+v", r)
	}
	e.wantApplied(t, tok)
}
