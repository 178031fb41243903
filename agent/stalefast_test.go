package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/protocol"
)

// forge returns tok with its signature altered: the body (domain, position,
// holder, key id) is the genuine token's, the signature is not.
func forge(t *testing.T, tok string) string {
	t.Helper()
	i := strings.LastIndexByte(tok, '.')
	if i < 0 || i+2 > len(tok) {
		t.Fatalf("token %q has no signature part", tok)
	}
	sig := []byte(tok[i+1:])
	if sig[1] == 'A' { // one base64url character of the signature, changed (all its bits are used)
		sig[1] = 'B'
	} else {
		sig[1] = 'A'
	}
	return tok[:i+1] + string(sig)
}

// holds: a token with a bad signature is never accepted, whatever position
// it claims relative to the fence — below it (answered stale_token, the
// signature need not be checked: nothing is accepted), at it (same lease
// or another) or above it (invalid_token, verified and refused). Nothing
// reaches the device and the fence does not move.
func TestForgedTokenRefusedAtEveryPosition(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	wantResult(t, h.sup.Send(t, "pump1", set("a", h.token(10, "A"), 1)), protocol.StatusApplied, protocol.CodeOK)
	tests := []struct {
		name string
		seq  uint64
		who  string
		code protocol.Code
	}{
		{"below the fence", 5, "A", protocol.CodeStaleToken},
		{"below the fence, another holder", 9, "Z", protocol.CodeStaleToken},
		{"at the fence, same lease", 10, "A", protocol.CodeInvalidToken},
		{"at the fence, another lease", 10, "Z", protocol.CodeInvalidToken},
		{"above the fence", 11, "A", protocol.CodeInvalidToken},
		{"far above the fence", 1 << 40, "Z", protocol.CodeInvalidToken},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := set("forged-"+string(rune('a'+i)), forge(t, h.token(tc.seq, tc.who)), 2)
			wantResult(t, h.sup.Send(t, "pump1", cmd), protocol.StatusRejected, tc.code)
			if s := h.domainSeq("plant"); s != 10 {
				t.Fatalf("fence at %d after a forged token, want 10", s)
			}
		})
	}
	if got := appliedIDs(t, h, "pump1"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("device applied %v, want only a", got)
	}
}

// holds: answers that skip the signature check for a token below the
// fence are the answers a verified stale token got before: stale_token for
// a fresh command, the journaled result for a retry, unknown_op for an op
// the device lacks.
func TestStaleTokenAnswersUnchanged(t *testing.T) {
	h := newHarness(t, "pump1")
	h.start()
	first := h.sup.Send(t, "pump1", set("a", h.token(10, "A"), 1))
	wantResult(t, first, protocol.StatusApplied, protocol.CodeOK)
	wantResult(t, h.sup.Send(t, "pump1", set("b", h.token(12, "B"), 2)), protocol.StatusApplied, protocol.CodeOK)

	r := h.sup.Send(t, "pump1", set("c", h.token(11, "A"), 3))
	wantResult(t, r, protocol.StatusRejected, protocol.CodeStaleToken)
	if r.Fence == nil || r.Fence.Seq != 12 || r.Message != staleMessage {
		t.Fatalf("stale answer: fence %+v, message %q", r.Fence, r.Message)
	}
	again := h.sup.Send(t, "pump1", set("a", h.token(10, "A"), 1)) // a retry below the fence
	if !again.Duplicate || again.Status != protocol.StatusApplied {
		t.Fatalf("retry of a below the fence: %s/%s duplicate=%v, want its journaled result", again.Status, again.Code, again.Duplicate)
	}
	op := protocol.Command{ID: "d", Token: h.token(11, "A"), Op: "no-such-op"}
	wantResult(t, h.sup.Send(t, "pump1", op), protocol.StatusRejected, protocol.CodeUnknownOp)
	if got := appliedIDs(t, h, "pump1"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("device applied %v, want a and b", got)
	}
}
