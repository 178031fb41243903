package agent

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/protocol"
	"github.com/fencegate/fencegate/transport/mqtt"
)

// addDevice adds a sim device in domain to the harness's config, logging
// its applies to <dir>/<id>.log like newHarness's devices.
func (h *harness) addDevice(t *testing.T, id, domain string) {
	t.Helper()
	h.cfg.Devices = append(h.cfg.Devices, DeviceConfig{ID: id, Domain: domain, Driver: "sim",
		Settings: simSettings(t, fmt.Sprintf("log: %s", filepath.Join(h.dir, id+".log")))})
}

// TestAttackRegroupedDeviceWrongDomainDropsGrants breaks I2 ("a grant is
// never dropped"; no token older than an accepted grant enters a driver).
//
// pump1 ran in its default domain (its own id), so its durable device
// fence is a "pump1" token. The operator then groups pump1 with a new
// pump2 in domain "plant". Found: a command to pump1 with a plant token
// was answered wrong_domain, and decide handed that decision's fence — the
// "pump1"-domain token — to the plant domain's mirror, which took it; from
// then on every plant grant was silently dropped and A's stale 41 reached
// pump2 after B's grant 42. Fixed: mirrors take only their own domain's
// tokens, and a device moved to another domain is re-homed at start.
func TestAttackRegroupedDeviceWrongDomainDropsGrants(t *testing.T) {
	h := newHarness(t)
	h.addDevice(t, "pump1", "pump1") // the default: the device id
	h.start()
	wantResult(t, h.sup.Send(t, "pump1", set("old", h.tokenIn("pump1", 7, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.cfg.Devices[0].Domain = "plant" // regrouped
	h.addDevice(t, "pump2", "plant")
	h.start()
	// pump1 was re-homed at start: the plant fence governs it now, and its
	// old domain's tokens are refused.
	wantResult(t, h.sup.Send(t, "pump1", set("p1", h.token(40, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
	wantResult(t, h.sup.Send(t, "pump1", set("p0", h.tokenIn("pump1", 8, "A"), 1)), protocol.StatusRejected, protocol.CodeWrongDomain)

	wantResult(t, h.sup.Send(t, "pump2", set("a1", h.token(41, "A"), 2)), protocol.StatusApplied, protocol.CodeOK)
	h.announce(t, "plant", h.token(42, "B")) // reaches the agent before a2: same publisher, same connection
	r := h.sup.Send(t, "pump2", set("a2", h.token(41, "A"), 3))
	if r.Code != protocol.CodeStaleToken {
		t.Errorf("A's 41 after B's grant 42: %s/%s (%s), want rejected/stale_token; plant fence is %d",
			r.Status, r.Code, r.Message, h.domainSeq("plant"))
	}
	if got := appliedIDs(t, h, "pump2"); len(got) != 1 {
		t.Errorf("pump2 applied %v after B's grant, want only a1", got)
	}
	if dm := h.agent.domains["plant"]; dm.current().Domain != "plant" {
		t.Errorf("plant's fence mirror holds a token of domain %q: %s", dm.current().Domain, dm.current())
	}
}

// holds: a valid grant of one domain published on another owned domain's
// grant topic, and a valid grant of a domain the agent does not own, are
// both ignored (I5: a foreign-domain token cannot raise a fence); the real
// grant on the right topic still raises it.
func TestAttackGrantOnForeignTopicIgnored(t *testing.T) {
	h := newHarness(t, "pump1")
	h.addDevice(t, "valve1", "yard")
	h.start()
	h.announce(t, "plant", h.tokenIn("yard", 90, "M")) // yard's token on plant's topic
	h.announce(t, "yard", h.tokenIn("plant", 91, "M")) // and the other way round
	h.announce(t, "elsewhere", h.tokenIn("elsewhere", 92, "M"))
	h.announce(t, "plant", h.token(5, "B"))
	waitFor(t, "plant's real grant durable", func() bool { return h.domainSeq("plant") == 5 })
	if s := h.domainSeq("yard"); s != 0 {
		t.Fatalf("yard's fence moved to %d by a grant on plant's topic", s)
	}
	fences, err := h.agent.env.store.DomainFences()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fences["elsewhere"]; ok || len(fences) != 1 {
		t.Fatalf("domain fences %v, want only plant", fences)
	}
	wantResult(t, h.sup.Send(t, "valve1", set("v1", h.tokenIn("yard", 3, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
}

// holds: reply_to variants meant to slip past protocol.ReplyRule — the bare
// prefix, case changes, a missing slash, a leading slash, dot segments
// (MQTT has none: the topic stays inside the namespace), NUL, wildcards,
// oversize — are either refused (answered bad_request on the results
// topic) or stay inside the reply namespace; none is applied, and an
// oversize payload's salvageable reply_to to a forbidden topic is not used.
func TestAttackReplyToVariants(t *testing.T) {
	h := newHarness(t, "pump1")
	h.cfg.Limits.MaxPayload = 4096
	h.start()
	tok := h.token(5, "A")
	refused := []string{"fencegate/v1/replies/", "fencegate/v1/replies", "Fencegate/v1/replies/x", "/fencegate/v1/replies/x",
		"fencegate/v1/replies/x\x00y", "fencegate/v1/replies/+", "fencegate/v1/replies/" + strings.Repeat("a", 1100),
		"fencegate/v1/devices/pump1/commands", "$share/g/fencegate/v1/replies/x"}
	for i, rt := range refused {
		cmd := set(fmt.Sprintf("rt%d", i), tok, i)
		cmd.ReplyTo = rt
		r := h.sup.Send(t, "pump1", cmd) // the supervisor only hears the results topic and its own replies
		wantResult(t, r, protocol.StatusRejected, protocol.CodeBadRequest)
	}
	inside := set("dots", tok, 99) // no dot segments in MQTT: a topic inside the namespace, honoured
	inside.ReplyTo = "fencegate/v1/replies/../devices/pump1/commands"
	wantResult(t, h.sup.Send(t, "pump1", inside), protocol.StatusApplied, protocol.CodeOK)
	big := fmt.Sprintf(`{"id":"big","token":%q,"op":"set","reply_to":%q,"args":{"value":"%s"}}`,
		tok, protocol.Topics{}.DeviceCommands("pump1"), strings.Repeat("x", 5000))
	h.sup.PublishRaw(t, "pump1", []byte(big))
	wantResult(t, h.sup.Wait(t, "big"), protocol.StatusRejected, protocol.CodeBadRequest) // arrived on the results topic
	if got := appliedIDs(t, h, "pump1"); len(got) != 1 || got[0] != "dots" {
		t.Fatalf("device applied %v, want only dots", got)
	}
	if j, _ := h.agent.env.store.Journal("pump1"); len(j) != 1 {
		t.Fatalf("refused commands journaled: %v", j)
	}
}

// holds: a retained command (published by an attacker so that it is
// replayed to every agent that subscribes) is applied at most once, live,
// and not again when the agent restarts and the broker replays it.
func TestAttackRetainedCommandNotReplayed(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	b, _ := json.Marshal(pulse("ret", h.token(5, "A"), 1))
	if err := mqtt.Wait(h.sup.Client().Publish(protocol.Topics{}.DeviceCommands("pump1"), 1, true, b), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	h.sup.Wait(t, "ret") // the live delivery
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.start()
	// barrier: a later command's answer comes after anything the replay caused
	wantResult(t, h.sup.Send(t, "pump1", set("after", h.token(5, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
	if got := appliedIDs(t, h, "pump1"); len(got) != 2 {
		t.Fatalf("device applied %v, want ret once and after", got)
	}
}

// holds: two devices of one domain racing — A's set, accepted on pump1
// while A's pulse holds it, must not reach pump1 once B's command on pump2
// raised the domain's fence (I2: compared again before the driver, with
// the domain's fence, whichever device raised it).
func TestAttackQueuedBehindOtherDeviceRaise(t *testing.T) {
	h := newHarness(t, "pump1", "pump2")
	h.start()
	a := h.token(41, "A")
	h.sup.Publish(t, "pump1", pulse("p1", a, 1500))
	h.sup.Publish(t, "pump1", set("s1", a, 1))
	waitFor(t, "s1 accepted", func() bool { return h.journaled("pump1", "s1") })
	wantResult(t, h.sup.Send(t, "pump2", set("b1", h.token(42, "B"), 2)), protocol.StatusApplied, protocol.CodeOK)
	wantResult(t, h.sup.Wait(t, "p1"), protocol.StatusApplied, protocol.CodeOK)
	r := h.sup.Wait(t, "s1")
	wantResult(t, r, protocol.StatusRejected, protocol.CodeStaleToken)
	if got := appliedIDs(t, h, "pump1"); len(got) != 1 || got[0] != "p1" {
		t.Fatalf("pump1 applied %v, want only p1", got)
	}
}
