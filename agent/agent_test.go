package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencegate/fencegate/devices/sim"
	"github.com/fencegate/fencegate/fence/fencetest"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/eclipse/paho.mqtt.golang.(*router).matchAndDispatch"))
}

func set(id, tok string, v int) protocol.Command {
	return protocol.Command{ID: id, Token: tok, Op: "set", Args: json.RawMessage(fmt.Sprintf(`{"value":%d}`, v))}
}

func wantResult(t *testing.T, r protocol.Result, st protocol.Status, code protocol.Code) {
	t.Helper()
	if r.Status != st || r.Code != code {
		t.Fatalf("result %s: %s/%s (%s), want %s/%s", r.ID, r.Status, r.Code, r.Message, st, code)
	}
}

// TestStaleHolderIsFenced is the scenario fencegate exists for: A holds
// token 41 and pauses; B gets 42 and writes; A's delayed write is rejected
// with the fence at 42 and never reaches the device.
func TestStaleHolderIsFenced(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	wantResult(t, h.sup.Send(t, "pump1", set("a1", h.token(41, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
	wantResult(t, h.sup.Send(t, "pump1", set("b1", h.token(42, "B"), 2)), protocol.StatusApplied, protocol.CodeOK)
	r := h.sup.Send(t, "pump1", set("a2", h.token(41, "A"), 3))
	wantResult(t, r, protocol.StatusRejected, protocol.CodeStaleToken)
	if r.Fence == nil || r.Fence.Seq != 42 || r.Fence.Holder != "B" {
		t.Fatalf("rejection carries fence %+v, want seq 42 of B", r.Fence)
	}
	entries := simLog(t, h, "pump1")
	if len(entries) != 2 || entries[1].ID != "b1" {
		t.Fatalf("device applied %+v, want a1 then b1", entries)
	}
}

// TestGrantAnnouncementRaisesFence: B's grant is announced before B sends
// anything; A's delayed write is already rejected.
func TestGrantAnnouncementRaisesFence(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	wantResult(t, h.sup.Send(t, "pump1", set("a1", h.token(41, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
	grant, _ := json.Marshal(protocol.Grant{Token: h.token(42, "B")})
	forged, _ := json.Marshal(protocol.Grant{Token: forgedToken(t, 99)})
	h.sup.Client().Publish(protocol.Topics{}.LeaseGrant("plant"), 1, true, forged).Wait()
	h.sup.Client().Publish(protocol.Topics{}.LeaseGrant("plant"), 1, true, grant).Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := h.sup.Send(t, "pump1", set(fmt.Sprintf("a-%d", time.Now().UnixNano()), h.token(41, "A"), 2))
		if r.Code == protocol.CodeStaleToken {
			if r.Fence.Seq != 42 {
				t.Fatalf("fence %+v, want 42 (the forged grant must not count)", r.Fence)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("grant never raised the fence; last result %+v", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	f, err := h.agent.env.store.DomainFences()
	if err != nil || f["plant"].Token.Seq != 42 {
		t.Fatalf("stored fence %v (%v), want 42", f["plant"].Token, err)
	}
}

func forgedToken(t *testing.T, seq uint64) string {
	t.Helper()
	tok, err := fencetest.MustSigner(t, 77).Sign(fenceToken("plant", seq, "M"))
	if err != nil {
		t.Fatal(err)
	}
	return tok.Raw
}

func simLog(t *testing.T, h *harness, device string) []sim.Entry {
	t.Helper()
	entries, err := sim.ReadLog(filepath.Join(h.dir, device+".log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.CheckLog(entries); err != nil {
		t.Fatal(err)
	}
	return entries
}

func TestDuplicateAppliedOnce(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	tok := h.token(5, "A")
	first := h.sup.Send(t, "pump1", set("c1", tok, 7))
	wantResult(t, first, protocol.StatusApplied, protocol.CodeOK)
	again := h.sup.Send(t, "pump1", set("c1", tok, 7))
	wantResult(t, again, protocol.StatusApplied, protocol.CodeOK)
	if !again.Duplicate || first.Duplicate || string(again.Output) != string(first.Output) {
		t.Fatalf("retry: %+v, first: %+v", again, first)
	}
	if n := len(simLog(t, h, "pump1")); n != 1 {
		t.Fatalf("device applied %d times, want 1", n)
	}
}

func TestRestartKeepsFence(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	wantResult(t, h.sup.Send(t, "pump1", set("b1", h.token(42, "B"), 1)), protocol.StatusApplied, protocol.CodeOK)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.start()
	wantResult(t, h.sup.Send(t, "pump1", set("a1", h.token(41, "A"), 2)), protocol.StatusRejected, protocol.CodeStaleToken)
	r := h.sup.Send(t, "pump1", set("b1", h.token(42, "B"), 1))
	if !r.Duplicate || r.Status != protocol.StatusApplied {
		t.Fatalf("retry after restart: %+v", r)
	}
}

// TestBadInputAnsweredAndChangesNothing sends every kind of bad command and
// checks each gets its code, and that neither the device nor the store
// changed.
func TestBadInputAnsweredAndChangesNothing(t *testing.T) {
	h := newHarness(t, "pump1")
	h.cfg.Limits.MaxPayload = 4096
	h.start()
	good := h.token(10, "A")
	wantResult(t, h.sup.Send(t, "pump1", set("ok", good, 1)), protocol.StatusApplied, protocol.CodeOK)
	tampered := good[:len(good)-3] + flip(good[len(good)-3]) + good[len(good)-2:]
	past := time.Now().Add(-time.Minute).UnixMilli()
	tests := []struct {
		name    string
		payload string
		code    protocol.Code
	}{
		{"malformed json", `{"id":"m1","token":`, protocol.CodeBadRequest},
		{"wrong type", `{"id":"m2","token":"` + good + `","op":5}`, protocol.CodeBadRequest},
		{"missing token", `{"id":"m3","op":"set"}`, protocol.CodeBadRequest},
		{"missing op", `{"id":"m4","token":"` + good + `"}`, protocol.CodeBadRequest},
		{"unknown field", `{"id":"m5","token":"` + good + `","op":"set","deadline":1}`, protocol.CodeBadRequest},
		{"args not object", `{"id":"m6","token":"` + good + `","op":"set","args":[1]}`, protocol.CodeBadRequest},
		{"oversize", `{"id":"m7","token":"` + good + `","op":"set","args":{"value":"` + strings.Repeat("x", 5000) + `"}}`, protocol.CodeBadRequest},
		{"wildcard reply", `{"id":"m8","token":"` + good + `","op":"set","reply_to":"a/#"}`, protocol.CodeBadRequest},
		{"tampered token", `{"id":"m9","token":"` + tampered + `","op":"set"}`, protocol.CodeInvalidToken},
		{"foreign key", `{"id":"m10","token":"` + forgedToken(t, 50) + `","op":"set"}`, protocol.CodeInvalidToken},
		{"garbage token", `{"id":"m11","token":"hello","op":"set"}`, protocol.CodeInvalidToken},
		{"wrong domain", `{"id":"m12","token":"` + h.tokenIn("yard", 50, "A") + `","op":"set"}`, protocol.CodeWrongDomain},
		{"unknown op", `{"id":"m13","token":"` + h.tokenIn("plant", 50, "A") + `","op":"explode"}`, protocol.CodeUnknownOp},
		{"expired", fmt.Sprintf(`{"id":"m14","token":"%s","op":"set","deadline_ms":%d}`, h.token(50, "A"), past), protocol.CodeExpired},
	}
	for _, tc := range tests {
		id := protocol.Salvage([]byte(tc.payload), "id", protocol.MaxCommandIDLen) // "" when the payload is not JSON: the answer has no id
		h.sup.PublishRaw(t, "pump1", []byte(tc.payload))
		r := h.sup.Wait(t, id)
		if r.Status != protocol.StatusRejected || r.Code != tc.code {
			t.Errorf("%s: %s/%s (%s), want rejected/%s", tc.name, r.Status, r.Code, r.Message, tc.code)
		}
		if r.Fence == nil || r.Fence.Seq != 10 {
			t.Errorf("%s: rejection carries fence %+v, want seq 10", tc.name, r.Fence)
		}
	}
	if n := len(simLog(t, h, "pump1")); n != 1 {
		t.Fatalf("device applied %d commands, want 1", n)
	}
	f, _ := h.agent.env.store.Fences()
	j, _ := h.agent.env.store.Journal("pump1")
	if f["pump1"].Token.Seq != 10 || len(j) != 1 {
		t.Fatalf("store changed: fence %v, journal %d records", f["pump1"].Token, len(j))
	}
}

func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

// TestUnknownDeviceChangesNothing: a command for a device the agent does
// not own is not taken (the agent subscribes to its own devices only, so
// several agents can share a broker).
func TestUnknownDeviceChangesNothing(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	h.sup.PublishRaw(t, "ghost", mustJSON(set("g1", h.token(3, "A"), 1)))
	wantResult(t, h.sup.Send(t, "pump1", set("p1", h.token(1, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
	f, _ := h.agent.env.store.Fences()
	if _, ok := f["ghost"]; ok || f["pump1"].Token.Seq != 1 {
		t.Fatalf("fences %v", f)
	}
}

// TestUnknownDeviceAnsweredWhenSoleAgent: with answer_unknown_devices the
// agent answers a command for a device it does not own, and stores nothing.
func TestUnknownDeviceAnsweredWhenSoleAgent(t *testing.T) {
	h := newHarness(t, "pump1")
	h.cfg.Agent.AnswerUnknownDevices = true
	h.start()
	r := h.sup.Send(t, "ghost", set("g1", h.token(3, "A"), 1))
	wantResult(t, r, protocol.StatusRejected, protocol.CodeBadRequest)
	if r.Device != "ghost" || !strings.Contains(r.Message, "unknown device") {
		t.Fatalf("answer %+v", r)
	}
	wantResult(t, h.sup.Send(t, "pump1", set("p1", h.token(1, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
	f, _ := h.agent.env.store.Fences()
	if _, ok := f["ghost"]; ok || len(f) != 1 {
		t.Fatalf("fences %v", f)
	}
	if j, _ := h.agent.env.store.Journal("ghost"); len(j) != 0 {
		t.Fatalf("journal of an unknown device: %v", j)
	}
}

func TestBurstPastQueueLimitAnsweredBusy(t *testing.T) {
	h := newHarness(t, "pump1")
	h.cfg.Limits.Queue = 2
	h.cfg.Devices[0].Settings = simSettings(t, "latency: 200ms\nlog: "+filepath.Join(h.dir, "pump1.log"))
	h.start()
	tok := h.token(1, "A")
	const n = 12
	for i := range n {
		id := fmt.Sprintf("burst%d", i)
		h.sup.Client().Publish(protocol.Topics{}.DeviceCommands("pump1"), 1, false, mustJSON(set(id, tok, i)))
	}
	busy, applied := 0, 0
	for i := range n {
		r := h.sup.Wait(t, fmt.Sprintf("burst%d", i))
		switch r.Code {
		case protocol.CodeBusy:
			busy++
		case protocol.CodeOK:
			applied++
		default:
			t.Fatalf("unexpected %+v", r)
		}
	}
	if busy == 0 || applied == 0 {
		t.Fatalf("busy %d applied %d: want both", busy, applied)
	}
	j, _ := h.agent.env.store.Journal("pump1")
	if len(j) != applied || len(simLog(t, h, "pump1")) != applied {
		t.Fatalf("journal %d, device log %d, applied answers %d", len(j), len(simLog(t, h, "pump1")), applied)
	}
}

// TestBrokerRestart: the broker goes away and comes back on the same
// address; the agent reconnects, resubscribes, and a retry of a command
// sent before the outage gets its original result.
func TestBrokerRestart(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	tok := h.token(1, "A")
	first := h.sup.Send(t, "pump1", set("before", tok, 1))
	addr := h.broker.Addr()
	online := h.sup.WatchOnline("gw1")
	h.broker.Close()
	b, err := mqtt.StartEmbedded(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.broker = b
	select {
	case <-online:
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not come back online after the broker restart")
	}
	again := h.sup.Send(t, "pump1", set("before", tok, 1))
	if !again.Duplicate || again.Status != first.Status {
		t.Fatalf("retry after broker restart: %+v", again)
	}
	wantResult(t, h.sup.Send(t, "pump1", set("after", tok, 2)), protocol.StatusApplied, protocol.CodeOK)
}

func TestDeviceStatusOverHTTP(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	wantResult(t, h.sup.Send(t, "pump1", set("c1", h.token(4, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
	var list []DeviceStatus
	getJSON(t, "http://"+h.agent.HTTPAddr()+"/v1/devices", &list)
	if len(list) != 1 || list[0].Fence == nil || list[0].Fence.Seq != 4 || list[0].LastResult == nil || list[0].LastResult.ID != "c1" {
		t.Fatalf("/v1/devices: %+v", list)
	}
	body := getBody(t, "http://"+h.agent.HTTPAddr()+"/metrics")
	for _, want := range []string{`fencegate_agent_commands_total{code="ok"} 1`, "fencegate_agent_commit_seconds_count", "fencegate_agent_fence_advances_total 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestStoreFailureStopsAgent: a fence store that cannot commit stops the
// agent with an error instead of applying unfenced commands.
func TestStoreFailureStopsAgent(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	if err := h.agent.env.store.Close(); err != nil { // simulates a dead disk
		t.Fatal(err)
	}
	h.sup.PublishRaw(t, "pump1", mustJSON(set("x", h.token(1, "A"), 1)))
	r := h.sup.Wait(t, "x")
	wantResult(t, r, protocol.StatusFailed, protocol.CodeInternal)
	if err := h.stop(); err == nil || !strings.Contains(err.Error(), persist.ErrClosed.Error()) {
		t.Fatalf("Run returned %v, want the store error", err)
	}
	if n := len(simLog(t, h, "pump1")); n != 0 {
		t.Fatalf("device applied %d commands without a store", n)
	}
	_ = context.Background
}

// TestJournalRetentionIsConfigured: with journal.max_records 3 (the least
// limits.queue 1 allows), a command id that six newer commands pushed out
// of the journal is a new command when it comes again (applied again, not
// a duplicate), while one still in the window is answered from the
// journal. The dedupe window is what the operator configured, no more and
// no less.
func TestJournalRetentionIsConfigured(t *testing.T) {
	h := newHarness(t, "pump1")
	h.cfg.Journal.MaxRecords, h.cfg.Limits.Queue = 3, 1
	h.start()
	tok := h.token(5, "A")
	for i := range 7 {
		wantResult(t, h.sup.Send(t, "pump1", set(fmt.Sprintf("c%d", i), tok, i)), protocol.StatusApplied, protocol.CodeOK)
	}
	recent := h.sup.Send(t, "pump1", set("c6", tok, 6))
	if !recent.Duplicate {
		t.Fatalf("c6, the newest command, was not answered from the journal: %+v", recent)
	}
	old := h.sup.Send(t, "pump1", set("c0", tok, 0))
	wantResult(t, old, protocol.StatusApplied, protocol.CodeOK)
	if old.Duplicate {
		t.Fatalf("c0 is still in a journal of at most 3 records: %+v", old)
	}
	entries, err := sim.ReadLog(filepath.Join(h.dir, "pump1.log")) // not CheckLog: c0 twice is the point
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 8 || entries[7].ID != "c0" {
		t.Fatalf("device log %+v, want 8 applies, the last c0 again as a new command", entries)
	}
}
