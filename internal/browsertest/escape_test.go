package browsertest

import (
	"context"
	"testing"
	"time"
)

// Markup in ids reaches the pages only as text. Device ids and holders
// are [A-Za-z0-9._-] (the agent and controller refuse others), so the
// strings a sender controls are command ids and args: one in doubt (in the
// page as rendered by the server) and one as the device's last result (in
// the page as the script refreshes it). The assertions are on the DOM.
func TestAgentPageEscapesIDs(t *testing.T) {
	const (
		doubtID = `<img src=x onerror="window.__pwned=1">`
		doubtJS = `{"value":"</td><script>window.__pwned=2</script>"}`
		lastID  = `"><img src=y onerror="window.__pwned=3"><b id=injected>`
	)
	b := newBrowser(t)
	w := newWorld(t, inDoubtSeed{id: doubtID, args: doubtJS})
	la, _ := w.acquireAndSet(w.supervisor("sup-a"), 1)

	b.open(w.agentURL+"/?refresh=200", pumpRow)
	b.checkNoInjection()
	if got := eval[string](b, `document.querySelector("#indoubt .c-cmd")?.textContent ?? ""`); got != doubtID {
		t.Fatalf("in-doubt id shown: %q, want it as text %q", got, doubtID)
	}
	if got := eval[string](b, cell(pumpRow, "c-indoubt")); got != "1" {
		t.Fatalf("in-doubt count: %q", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := la.SendID(ctx, lastID, "pump1", "set", map[string]any{"value": 5}); err != nil {
		t.Fatal(err)
	}
	b.waitTrue("the script shows the last result", cell(pumpRow, "c-last")+sprintf(` === %q`, "applied/ok "+lastID), cell(pumpRow, "c-last"))
	b.checkNoInjection()
	b.open(w.agentURL+"/?refresh=200", pumpRow) // and as the server renders it
	if got := eval[string](b, cell(pumpRow, "c-last")); got != "applied/ok "+lastID {
		t.Fatalf("last result rendered: %q", got)
	}
	b.checkNoInjection()
	b.screenshot("agent-status-escaped")
	b.noProblems()
}

// checkNoInjection: no element and no script came from the ids.
func (b *browser) checkNoInjection() {
	b.t.Helper()
	got := eval[string](b, `[document.querySelectorAll("img").length, document.scripts.length,
		document.getElementById("injected") === null, typeof window.__pwned].join(",")`)
	if got != "0,1,true,undefined" {
		b.t.Fatalf("injected markup in the page (img count, script count, no #injected, typeof __pwned): %s", got)
	}
}
