package pagehead

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSetNoncePerResponse: every response gets its own nonce, named in the
// policy for style and script, and nothing external is allowed.
func TestSetNoncePerResponse(t *testing.T) {
	a, b := httptest.NewRecorder(), httptest.NewRecorder()
	na, nb := Set(a), Set(b)
	if na == "" || na == nb {
		t.Fatalf("nonces %q and %q, want two different non-empty ones", na, nb)
	}
	csp := a.Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'nonce-" + na + "'", "style-src 'nonce-" + na + "'", "connect-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("policy %q lacks %q", csp, want)
		}
	}
	if got := a.Header().Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", got)
	}
}
