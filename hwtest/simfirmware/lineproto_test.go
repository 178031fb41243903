package simfirmware

import (
	"strings"
	"testing"

	"github.com/fencegate/fencegate/transport/serial"
)

// TestLineOfBlanksDoesNotPanic: a request line holding only blanks is
// answered with an error line, not a crash of the firmware.
func TestLineOfBlanksDoesNotPanic(t *testing.T) {
	fw := newFuzzFirmware(t, "line")
	for _, blank := range []string{" ", "\t \t", "   "} {
		reply, _ := fw.handleLine(serial.Msg{Data: []byte(blank)})
		if !strings.HasPrefix(string(reply), "ERR ") || !strings.HasSuffix(string(reply), "\r\n") {
			t.Errorf("reply to %q = %q, want one ERR line", blank, reply)
		}
	}
	if st := fw.stats(); !strings.Contains(st, `"applied":0`) {
		t.Fatalf("blank lines applied something: %s", st)
	}
}
