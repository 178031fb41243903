package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/protocol"
)

// TestBadArgsRejectedBeforeAcceptance: the built-in sim driver's refusal of
// args (no value for set) answers rejected/bad_request before acceptance —
// no journal entry, no fence raised — and the message does not repeat the
// code.
func TestBadArgsRejectedBeforeAcceptance(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	bad := protocol.Command{ID: "b1", Token: h.token(5, "A"), Op: "set", Args: json.RawMessage(`{"colour":"red"}`)}
	r := h.sup.Send(t, "pump1", bad)
	wantResult(t, r, protocol.StatusRejected, protocol.CodeBadRequest)
	if want := `set: unknown arg "colour" (known: [value])`; r.Message != want {
		t.Fatalf("message %q, want %q", r.Message, want)
	}
	if strings.Contains(r.Message, "bad_request") || strings.Contains(r.Message, "device_error") {
		t.Fatalf("message repeats a code: %q", r.Message)
	}
	if _, known, err := h.agent.env.store.Lookup("pump1", "b1"); known || err != nil || h.domainSeq("pump1") != 0 {
		t.Fatalf("refused command journaled (%v, %v) or fence raised to %d", known, err, h.domainSeq("pump1"))
	}
}
