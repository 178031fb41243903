package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	_ "github.com/fencegate/fencegate/devices/mqttrelay"
	"github.com/fencegate/fencegate/persist"
	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

func pulse(id, tok string, ms int) protocol.Command {
	return protocol.Command{ID: id, Token: tok, Op: "pulse", Args: json.RawMessage(fmt.Sprintf(`{"ms":%d}`, ms))}
}

// waitFor polls cond until it holds or 15 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) journaled(device, id string) bool {
	r, ok, err := h.agent.env.store.Lookup(device, id)
	return err == nil && ok && r.State == persist.StateAccepted
}

func (h *harness) domainSeq(domain string) uint64 {
	tok, err := h.agent.env.store.DomainFence(domain)
	if err != nil {
		h.t.Fatal(err)
	}
	return tok.Seq
}

func (h *harness) announce(t *testing.T, domain, token string) {
	t.Helper()
	g, _ := json.Marshal(protocol.Grant{Token: token})
	if err := mqtt.Wait(h.sup.Client().Publish(protocol.Topics{}.LeaseGrant(domain), 1, true, g), 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

func appliedIDs(t *testing.T, h *harness, device string) []string {
	var ids []string
	for _, e := range simLog(t, h, device) {
		ids = append(ids, e.ID)
	}
	return ids
}

// TestItem1QueuedOlderCommandNotAppliedAfterNewerGrant: A's set, accepted
// while A's pulse runs, must not reach the device once B's grant raised the
// fence; it is answered stale_token with B's fence. The pulse already
// inside the driver is the documented exception.
func TestItem1QueuedOlderCommandNotAppliedAfterNewerGrant(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	a := h.token(41, "A")
	h.sup.Publish(t, "pump1", pulse("p1", a, 1500))
	h.sup.Publish(t, "pump1", set("s1", a, 1))
	waitFor(t, "s1 accepted", func() bool { return h.journaled("pump1", "s1") })
	h.announce(t, "plant", h.token(42, "B"))
	waitFor(t, "the grant durable", func() bool { return h.domainSeq("plant") == 42 })

	wantResult(t, h.sup.Wait(t, "p1"), protocol.StatusApplied, protocol.CodeOK)
	r := h.sup.Wait(t, "s1")
	wantResult(t, r, protocol.StatusRejected, protocol.CodeStaleToken)
	if r.Fence == nil || r.Fence.Seq != 42 || r.Fence.Holder != "B" {
		t.Fatalf("stale answer carries fence %+v, want B's 42", r.Fence)
	}
	if got := appliedIDs(t, h, "pump1"); len(got) != 1 || got[0] != "p1" {
		t.Fatalf("device applied %v, want only p1", got)
	}
	rec, ok, _ := h.agent.env.store.Lookup("pump1", "s1")
	if !ok || rec.State != persist.StateDone || !strings.Contains(string(rec.Result), `"stale_token"`) {
		t.Fatalf("s1 journaled as %+v, want done with the stale_token result", rec)
	}
	again := h.sup.Send(t, "pump1", set("s1", a, 1))
	if !again.Duplicate || again.Code != protocol.CodeStaleToken {
		t.Fatalf("retry of s1: %+v, want the durable stale_token answer", again)
	}
}

// TestItem2GrantNotDroppedWhenQueueFull: a runaway stale holder fills the
// device's queue; B's grant still raises the fence at once, and none of A's
// queued commands reaches the device after it.
func TestItem2GrantNotDroppedWhenQueueFull(t *testing.T) {
	h := newHarness(t, "pump1")
	h.cfg.Limits.Queue = 2
	h.start()
	a := h.token(41, "A")
	h.sup.Publish(t, "pump1", pulse("p1", a, 2000))
	waitFor(t, "p1 accepted", func() bool { return h.journaled("pump1", "p1") })
	const flood = 12
	for i := range flood {
		h.sup.Publish(t, "pump1", set(fmt.Sprintf("s%d", i), a, i))
	}
	h.announce(t, "plant", h.token(42, "B"))
	waitFor(t, "the grant durable while the queue is full", func() bool { return h.domainSeq("plant") == 42 })
	// p1 was accepted before the grant; if its worker had not reached the
	// driver yet when the grant landed, the check just before the device
	// refuses it (stale_token), which is right too.
	p1 := h.sup.Wait(t, "p1")
	if p1.Code != protocol.CodeOK && p1.Code != protocol.CodeStaleToken {
		t.Fatalf("p1: %s/%s (%s), want applied, or stale_token from the check before the device", p1.Status, p1.Code, p1.Message)
	}
	counts := map[protocol.Code]int{}
	for i := range flood {
		r := h.sup.Wait(t, fmt.Sprintf("s%d", i))
		counts[r.Code]++
		if r.Code != protocol.CodeStaleToken && r.Code != protocol.CodeBusy {
			t.Errorf("s%d: %s/%s (%s), want stale_token or busy", i, r.Status, r.Code, r.Message)
		}
	}
	if counts[protocol.CodeBusy] == 0 {
		t.Fatalf("the queue never filled (%v): the test did not exercise a full queue", counts)
	}
	want := 0
	if p1.Code == protocol.CodeOK {
		want = 1
	}
	if got := appliedIDs(t, h, "pump1"); len(got) != want || (want == 1 && got[0] != "p1") {
		t.Fatalf("device applied %v (p1 answered %s), want only what was answered applied", got, p1.Code)
	}
}

// TestItem3FenceIsPerDomain: B's token accepted on pump1 fences A on pump2
// of the same domain.
func TestItem3FenceIsPerDomain(t *testing.T) {
	h := newHarness(t, "pump1", "pump2")
	h.start()
	wantResult(t, h.sup.Send(t, "pump1", set("b1", h.token(42, "B"), 1)), protocol.StatusApplied, protocol.CodeOK)
	r := h.sup.Send(t, "pump2", set("a1", h.token(41, "A"), 2))
	wantResult(t, r, protocol.StatusRejected, protocol.CodeStaleToken)
	if r.Fence == nil || r.Fence.Seq != 42 {
		t.Fatalf("rejection on pump2 carries fence %+v, want 42", r.Fence)
	}
	if got := appliedIDs(t, h, "pump2"); len(got) != 0 {
		t.Fatalf("pump2 applied %v", got)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.start() // the domain fence is durable, not only in memory
	wantResult(t, h.sup.Send(t, "pump2", set("a2", h.token(41, "A"), 3)), protocol.StatusRejected, protocol.CodeStaleToken)
}

// TestItem4ReplyToConfinedToReplyNamespace: reply_to naming a relay's
// command topic, the agent's status, a command topic or a $ topic is not
// published to; the answer goes to the device's results topic as
// bad_request naming the rule. A reply_to in the namespace is honoured.
func TestItem4ReplyToConfinedToReplyNamespace(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	tok := h.token(5, "A")
	targets := []string{"cmnd/plug1/Backlog", protocol.Topics{}.AgentStatus("gw1"), protocol.Topics{}.DeviceCommands("pump1"),
		protocol.Topics{}.LeaseGrant("plant"), "$SYS/broker/x"}
	var watched []<-chan []byte
	for _, topic := range targets[:4] {
		ch := h.sup.Watch(t, topic)
		drain(ch) // retained status/grant
		watched = append(watched, ch)
	}
	for i, topic := range targets {
		cmd := set(fmt.Sprintf("r%d", i), tok, i)
		cmd.ReplyTo = topic
		r := h.sup.Send(t, "pump1", cmd)
		wantResult(t, r, protocol.StatusRejected, protocol.CodeBadRequest)
		if !strings.Contains(r.Message, "reply_to") {
			t.Errorf("answer for reply_to %q does not name the rule: %q", topic, r.Message)
		}
	}
	ok := set("ok", tok, 9)
	ok.ReplyTo = protocol.Topics{}.ReplyTopic("sup") + "/x"
	wantResult(t, h.sup.Send(t, "pump1", ok), protocol.StatusApplied, protocol.CodeOK) // barrier: published after the others
	for i, ch := range watched {
		for _, m := range drain(ch) {
			if strings.Contains(string(m), `"id":"r`) && strings.Contains(string(m), `"status":`) {
				t.Errorf("the agent published to %s: %s", targets[i], m)
			}
		}
	}
	if got := appliedIDs(t, h, "pump1"); len(got) != 1 {
		t.Fatalf("device applied %v, want only ok", got)
	}
}

func drain(ch <-chan []byte) [][]byte {
	var out [][]byte
	for {
		select {
		case m := <-ch:
			out = append(out, m)
		case <-time.After(100 * time.Millisecond):
			return out
		}
	}
}

// TestItem6IDReuseGetsBadRequest: B reusing A's command id gets
// bad_request, not A's result, and nothing reaches the device.
func TestItem6IDReuseGetsBadRequest(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	wantResult(t, h.sup.Send(t, "pump1", set("x", h.token(41, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
	r := h.sup.Send(t, "pump1", set("x", h.token(42, "B"), 2))
	wantResult(t, r, protocol.StatusRejected, protocol.CodeBadRequest)
	if r.Duplicate || !strings.Contains(r.Message, "id reused") {
		t.Fatalf("reused id answered %+v", r)
	}
	r = h.sup.Send(t, "pump1", set("x", h.token(41, "A"), 3)) // same token, other args
	wantResult(t, r, protocol.StatusRejected, protocol.CodeBadRequest)
	if got := appliedIDs(t, h, "pump1"); len(got) != 1 {
		t.Fatalf("device applied %v, want x once", got)
	}
	if h.domainSeq("plant") != 41 {
		t.Fatalf("a reused id moved the fence to %d", h.domainSeq("plant"))
	}
}

// TestItem8OversizePayloadRefusedBeforeQueue: with the device's queue full,
// an oversize command is still answered bad_request at once (it is checked
// before it is queued, so it never holds queue memory).
func TestItem8OversizePayloadRefusedBeforeQueue(t *testing.T) {
	h := newHarness(t, "pump1")
	h.cfg.Limits.Queue = 1
	h.cfg.Limits.MaxPayload = 4096
	h.start()
	a := h.token(41, "A")
	h.sup.Publish(t, "pump1", pulse("p1", a, 1500))
	waitFor(t, "p1 accepted", func() bool { return h.journaled("pump1", "p1") })
	h.sup.Publish(t, "pump1", set("q1", a, 1))
	h.sup.Publish(t, "pump1", set("q2", a, 2))
	big := fmt.Sprintf(`{"id":"big","token":%q,"op":"set","args":{"value":"%s"}}`, a, strings.Repeat("x", 8000))
	h.sup.PublishRaw(t, "pump1", []byte(big))
	r := h.sup.Wait(t, "big")
	wantResult(t, r, protocol.StatusRejected, protocol.CodeBadRequest)
	if !strings.Contains(r.Message, "at most 4096") {
		t.Fatalf("oversize answer %q does not give the limit", r.Message)
	}
	if _, ok, _ := h.agent.env.store.Lookup("pump1", "big"); ok {
		t.Fatal("an oversize command was journaled")
	}
}

// subscribeOrder is a broker hook recording, for one client, the filters it
// subscribes to and what probe said at that moment.
type subscribeOrder struct {
	mochi.HookBase
	client string
	mu     sync.Mutex
	probe  func() uint64 // nil until set
	seen   []string      // "filter@probe"
}

func (s *subscribeOrder) ID() string { return "subscribe-order" }
func (s *subscribeOrder) Provides(b byte) bool {
	return b == mochi.OnSubscribe
}
func (s *subscribeOrder) OnSubscribe(cl *mochi.Client, pk packets.Packet) packets.Packet {
	if cl.ID != s.client {
		return pk
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var at uint64
	if s.probe != nil {
		at = s.probe()
	}
	for _, f := range pk.Filters {
		s.seen = append(s.seen, fmt.Sprintf("%s@%d", f.Filter, at))
	}
	return pk
}

// TestItem10GrantsBeforeCommands: after an outage during which B was
// granted 42, the restarted agent subscribes to its grant topics first and
// has made B's retained grant durable before it subscribes to commands.
func TestItem10GrantsBeforeCommands(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	wantResult(t, h.sup.Send(t, "pump1", set("a1", h.token(41, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.announce(t, "plant", h.token(42, "B"))
	hook := &subscribeOrder{client: "fencegate-agent-gw1"}
	if err := h.broker.Server().AddHook(hook, nil); err != nil {
		t.Fatal(err)
	}
	a, err := New(h.cfg.WithDefaults(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	hook.mu.Lock()
	hook.probe = func() uint64 { tok, _ := a.env.store.DomainFence("plant"); return tok.Seq }
	hook.mu.Unlock()
	online := h.sup.WatchOnline("gw1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-online
	hook.mu.Lock()
	seen := append([]string(nil), hook.seen...)
	hook.mu.Unlock()
	want := []string{protocol.Topics{}.LeaseGrant("plant") + "@41", protocol.Topics{}.DeviceCommands("pump1") + "@42"}
	if len(seen) != 2 || seen[0] != want[0] || seen[1] != want[1] {
		t.Fatalf("subscriptions (filter@durable fence) %v, want %v", seen, want)
	}
}

// TestItem4ReplyToNeverADriverTopic: even with a broad reply prefix, a
// reply_to naming a topic an MQTT relay of this agent publishes to is
// refused: the sender cannot drive the relayed controller through a reply.
func TestItem4ReplyToNeverADriverTopic(t *testing.T) {
	h := newHarness(t, "pump1")
	h.cfg.MQTT.ReplyPrefixes = []string{"site/"}
	h.cfg.Devices = append(h.cfg.Devices, DeviceConfig{ID: "plug1", Domain: "plant", Driver: "mqttrelay",
		Settings: simSettings(t, "ops: [{name: power, topic: site/relays/plug1/cmnd/POWER, payload: '{{.state}}'}]")})
	h.start()
	relayed := h.sup.Watch(t, "site/relays/plug1/cmnd/POWER")
	cmd := set("r1", h.token(5, "A"), 1)
	cmd.ReplyTo = "site/relays/plug1/cmnd/POWER"
	r := h.sup.Send(t, "pump1", cmd)
	wantResult(t, r, protocol.StatusRejected, protocol.CodeBadRequest)
	if !strings.Contains(r.Message, "driver") {
		t.Fatalf("refusal %q does not name the driver-topic rule", r.Message)
	}
	ok := set("r2", h.token(5, "A"), 2)
	ok.ReplyTo = "site/replies/sup"
	replies := h.sup.Watch(t, "site/replies/sup")
	h.sup.Publish(t, "pump1", ok)
	select {
	case m := <-replies:
		if !strings.Contains(string(m), `"r2"`) || !strings.Contains(string(m), `"applied"`) {
			t.Fatalf("reply under a configured prefix: %s", m)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no reply under the configured prefix")
	}
	if got := drain(relayed); len(got) != 0 {
		t.Fatalf("the agent published to the relay's command topic: %q", got)
	}
}

// TestIssue12Item7OutputCap: a driver's output over devices.MaxOutputBytes
// is dropped, and the command — which did act — is answered applied with a
// message saying so (a failure code would invite a second apply).
func TestIssue12Item7OutputCap(t *testing.T) {
	h := newHarness(t, "pump1")
	h.cfg.Limits.MaxPayload = 256 << 10
	h.start()
	big := strings.Repeat("x", 100<<10)
	cmd := protocol.Command{ID: "big", Token: h.token(5, "A"), Op: "set", Args: json.RawMessage(fmt.Sprintf(`{"value":%q}`, big))}
	r := h.sup.Send(t, "pump1", cmd)
	wantResult(t, r, protocol.StatusApplied, protocol.CodeOK)
	if len(r.Output) != 0 || !strings.Contains(r.Message, "dropped") {
		t.Fatalf("over-cap output: %d bytes of output, message %q; want none and a message", len(r.Output), r.Message)
	}
	if got := appliedIDs(t, h, "pump1"); len(got) != 1 {
		t.Fatalf("device applied %v", got)
	}
}
