package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/fencegate/fencegate/protocol"
)

// Attacks on the reference device through real Mosquitto and the real
// controller. Each test fails on the device as it is, for the reason its
// comment gives.

// TestAttackForeignDomainRetryAnsweredApplied: positions of different
// domains collide as a rule — one controller signs every domain's tokens
// with its store's epoch, and each domain's seq counts from 1 — so the
// first lease of "plant" and the first of "other" are both @epoch.1. A
// client of "other" that reuses a command id the device applied under
// "plant" (ids are the client's choice: "job-1", a counter) gets the
// device's recorded answer, "applied" with duplicate true, for a command the
// device never applied: device.c looks the id up (retry) before it checks
// the domain, and compares only epoch and seq. The agent checks the domain
// first and answers wrong_domain; the device must too.
func TestAttackForeignDomainRetryAnsweredApplied(t *testing.T) {
	e := newEnv(t)
	e.startDevice(t, "")
	tokA := rawAcquire(t, e.dial(t, "sup-a"), domain, time.Minute)
	tokC := rawAcquire(t, e.dial(t, "sup-c"), "other", time.Minute)
	if tokA.Epoch != tokC.Epoch || tokA.Seq != tokC.Seq {
		t.Fatalf("precondition: the first leases of two domains share a position; got %v and %v", tokA, tokC)
	}
	cmd := protocol.Command{ID: "job-1", Token: tokA.Raw, Op: "power", Args: json.RawMessage(`{"state":"ON"}`)}
	if r := e.watcher.Send(t, device, cmd); r.Status != protocol.StatusApplied {
		t.Fatalf("plant's command: %+v", r)
	}
	cmd.Token = tokC.Raw // the same id, op and args under the other domain's lease
	r := e.watcher.Send(t, device, cmd)
	if r.Status == protocol.StatusApplied || r.Code != protocol.CodeWrongDomain {
		b, _ := json.Marshal(r)
		t.Errorf("a command of domain %q answered %s; want rejected wrong_domain (it was never applied)", tokC.Domain, b)
	}
	e.wantApplied(t, tokA)
}

// TestAttackReplyToThatIsNotATopic: a reply_to in the reply namespace that
// is not a valid MQTT topic name — a control character, which MQTT forbids
// and libmosquitto refuses to publish to (MOSQ_ERR_MALFORMED_UTF8), or bytes
// that are not UTF-8 — passes the device's reply_ok (prefix, no wildcards,
// length). The device then applies the command and publishes its result
// nowhere: bad input obeyed and not answered (I6). It must be answered
// bad_request on the device's results topic and not applied, as a reply_to
// outside the namespace is.
func TestAttackReplyToThatIsNotATopic(t *testing.T) {
	e := newEnv(t)
	e.startDevice(t, "")
	tok := rawAcquire(t, e.dial(t, "sup-a"), domain, time.Minute)
	cases := []struct{ id, replyTo string }{
		{"rt-ctrl", `"` + e.watcher.ReplyTo() + `/\u0001"`},    // valid JSON and UTF-8; not a valid MQTT topic
		{"rt-utf8", `"` + e.watcher.ReplyTo() + "/\xc3\x28\""}, // not UTF-8
	}
	for _, c := range cases {
		e.watcher.PublishRaw(t, device, []byte(`{"id":"`+c.id+`","token":"`+tok.Raw+`","op":"power","args":{"state":"ON"},"reply_to":`+c.replyTo+`}`))
	}
	// The device handles its commands one at a time, in order: once this
	// one is answered, the two above were handled.
	if r := e.watcher.Send(t, device, protocol.Command{ID: "rt-after", Token: tok.Raw, Op: "status"}); r.Status != protocol.StatusApplied {
		t.Fatalf("the command after them: %+v", r)
	}
	for _, en := range e.applied(t) {
		for _, c := range cases {
			if en.ID == c.id {
				t.Errorf("command %s, whose reply_to is not an MQTT topic, was applied: %+v", c.id, en)
			}
		}
	}
	for _, c := range cases {
		if r := e.watcher.Wait(t, c.id); r.Code != protocol.CodeBadRequest {
			t.Errorf("command %s: %+v, want bad_request on the results topic", c.id, r)
		}
	}
}
