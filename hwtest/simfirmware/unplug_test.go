package simfirmware

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Unplugging takes the link away, as udev removes a /dev/serial/by-id
// link: the pseudo-terminal number it pointed at may be handed to another
// terminal, and an agent reopening the old link must not reach that one
// (found by the fault harness: an agent reopened a reused /dev/pts/N and
// got answers from another schedule's firmware). Plug makes it again.
func TestUnplugRemovesLinkAndPlugRestoresIt(t *testing.T) {
	link := filepath.Join(t.TempDir(), "fw0")
	r := startRun(t, "--protocol", "frame", "--link", link)
	if _, err := os.Stat(link); err != nil {
		t.Fatalf("link before unplug: %v", err)
	}
	control(t, r, "unplug")
	if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("link after unplug: %v, want it gone", err)
	}
	control(t, r, "plug")
	if _, err := os.Stat(link); err != nil {
		t.Fatalf("link after plug: %v", err)
	}
	r.stop(t)
}

// control sends a control line and expects "ok", skipping "ready" lines.
func control(t *testing.T, r *running, line string) {
	t.Helper()
	if _, err := io.WriteString(r.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
	for {
		switch got := r.next(t); {
		case got == "ok":
			return
		case len(got) >= 5 && got[:5] == "ready":
		default:
			t.Fatalf("%s: got %q, want ok", line, got)
		}
	}
}
