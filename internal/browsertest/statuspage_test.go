package browsertest

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// cell is a JavaScript expression: the text of one cell of a row.
func cell(rowSel, class string) string {
	return sprintf(`(document.querySelector(%q)?.querySelector(%q)?.textContent ?? "")`, rowSel, "."+class)
}

const pumpRow = `tr[data-device="pump1"]`

// The agent's page loads without console errors and shows the fence move
// from holder A to holder B when B writes, without a reload.
func TestAgentPageShowsFenceMoving(t *testing.T) {
	b := newBrowser(t)
	w := newWorld(t)
	la, _ := w.acquireAndSet(w.supervisor("sup-a"), 1)
	b.open(w.agentURL+"/?refresh=200", pumpRow)
	if got := eval[string](b, cell(pumpRow, "c-holder")); got != "sup-a" {
		t.Fatalf("holder shown: %q, want sup-a", got)
	}
	fa := la.Fence()
	if got := eval[string](b, cell(pumpRow, "c-seq")); got != strconv.FormatUint(fa.Seq, 10) {
		t.Fatalf("seq shown: %q, want %d", got, fa.Seq)
	}
	if got := eval[string](b, cell(pumpRow, "c-epoch")); got != epochDate(fa.Epoch) {
		t.Fatalf("epoch shown: %q, want the date %s", got, epochDate(fa.Epoch))
	}
	for class, want := range map[string]string{"c-domain": "plant", "c-driver": "sim", "c-available": "yes", "c-indoubt": "0"} {
		if got := eval[string](b, cell(pumpRow, class)); got != want {
			t.Errorf("%s shown: %q, want %q", class, got, want)
		}
	}
	if got := eval[string](b, `document.getElementById("broker-state").textContent + "/" + document.getElementById("store-state").textContent`); got != "connected/healthy" {
		t.Errorf("broker/store shown: %q", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb, idB := w.acquireAndSet(w.supervisor("sup-b"), 2)
	fb := lb.Fence()
	b.waitTrue("the page shows B's fence", sprintf(`%s === "sup-b" && %s === "%d"`, cell(pumpRow, "c-holder"), cell(pumpRow, "c-seq"), fb.Seq),
		cell(pumpRow, "c-holder")+` + " " + `+cell(pumpRow, "c-seq"))
	b.waitTrue("the page shows B's result", cell(pumpRow, "c-last")+sprintf(` === %q`, "applied/ok "+idB), cell(pumpRow, "c-last"))
	b.screenshot("agent-status")
	b.noProblems()
}

// The controller's page shows each domain's holder, token position and
// time left, and follows a new holder.
func TestControllerPageShowsHolderMoving(t *testing.T) {
	b := newBrowser(t)
	w := newWorld(t)
	la, _ := w.acquireAndSet(w.supervisor("sup-a"), 1)
	row := `tr[data-domain="plant"]`
	b.open(w.ctrlURL+"/?refresh=200", row)
	fa := la.Fence()
	if got := eval[string](b, cell(row, "c-holder")+`+"|"+`+cell(row, "c-seq")+`+"|"+`+cell(row, "c-epoch")+`+"|"+`+cell(row, "c-live")); got != sprintf("sup-a|%d|%s|live", fa.Seq, epochDate(fa.Epoch)) {
		t.Fatalf("plant row: %q", got)
	}
	left := eval[string](b, cell(row, "c-left"))
	if d, err := time.ParseDuration(left); err != nil || d <= 0 || d > 30*time.Second {
		t.Fatalf("time left shown: %q, want a duration in (0, 30s]", left)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitTrue("the page shows the domain free", cell(row, "c-live")+` === "free"`, cell(row, "c-live"))
	lb, _ := w.acquireAndSet(w.supervisor("sup-b"), 2)
	b.waitTrue("the page shows B's lease", sprintf(`%s === "sup-b" && %s === "%d" && %s === "live"`, cell(row, "c-holder"), cell(row, "c-seq"), lb.Fence().Seq, cell(row, "c-live")),
		cell(row, "c-holder")+` + " " + `+cell(row, "c-seq"))
	b.screenshot("controller-status")
	b.noProblems()
}
