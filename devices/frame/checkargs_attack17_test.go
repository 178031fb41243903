package frame

import (
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/devices"
)

// Attack (issue 17b, devices.ArgsChecker): CheckArgs sizes the frame with a
// one-byte id and an empty domain and holder, but Apply frames the real
// command id (up to 128 bytes), domain and holder. Args between the two
// bounds pass CheckArgs — so the agent accepts the command, raises the
// domain's fence and journals it — and then Apply fails it as
// device_error ("command does not fit a protocol v1 frame") although
// nothing ever left for the device. ArgsChecker's contract
// (devices/driver.go) is that CheckArgs tells "that Apply would refuse a
// command's args"; here it says yes and Apply refuses. The agent knows the
// id and token before acceptance, so the check can be exact.
//
// Failed on the code it was written against: CheckArgs returned nil and
// Apply a device_error for the same op and args. Fixed: the agent asks
// CheckCommand (devices.CommandChecker), which sizes the frame Apply
// sends, id, domain and holder included; Apply answers bad_request (nothing
// was sent).
func TestAttack17FrameCheckArgsAdmitsArgsApplyRefuses(t *testing.T) {
	fw := newFirmware(t, applyAll)
	d := mustOpen(t, fw.path)
	// 28 fixed bytes with id "x", no domain or holder, op "set": args of
	// 990 bytes fit 1024; with a 128-byte id, domain "plant" and holder
	// "sup-a" they do not.
	args := `{"v":"` + strings.Repeat("x", 990-8) + `"}`
	if len(args) != 990 {
		t.Fatalf("args are %d bytes", len(args))
	}
	c := cmd(strings.Repeat("c", 128), "set", args, 3)
	checkErr := d.CheckCommand(c)
	_, applyErr := apply(d, c, 2*time.Second)
	if checkErr == nil && applyErr != nil {
		t.Fatalf("CheckArgs admitted args (nil) that Apply then refused as %q: %v — the agent accepted, raised the fence "+
			"and journaled a command that can never reach the device, answered device_error instead of bad_request before acceptance",
			devices.CodeOf(applyErr), applyErr)
	}
	if checkErr != nil && applyErr == nil {
		t.Fatalf("CheckCommand refused a command Apply takes: %v", checkErr)
	}
	if applyErr != nil && devices.CodeOf(applyErr) != devices.CodeBadRequest {
		t.Fatalf("Apply refused a frame it never sent as %q, want bad_request", devices.CodeOf(applyErr))
	}
	fits := `{"v":"` + strings.Repeat("x", 900-8) + `"}` // 39 fixed bytes with id "c1": fits; with the 128-byte id: not
	if err := d.CheckCommand(cmd(strings.Repeat("c", 128), "set", fits, 3)); err == nil {
		t.Fatalf("CheckCommand admitted %d-byte args with a 128-byte id, which do not fit", len(fits))
	}
	short := cmd("c1", "set", fits, 3)
	if err := d.CheckCommand(short); err != nil {
		t.Fatalf("CheckCommand refused the same args with a short id, which fit: %v", err)
	}
}
